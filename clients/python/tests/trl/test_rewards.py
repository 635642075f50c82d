"""RodsRewards as TRL's own code sees it (run in the TRL venv by clients/python/trl.e2e.test.ts).

The whole path (GRPOTrainer awaiting an async reward, an evaluation pass) runs in the e2e test;
here, what TRL 1.16 decides from the wrapper itself, and the refusal of a call TRL's experimental
async GRPO makes (trl/experimental/async_grpo/async_rollout_worker.py:1026-1037: the reward
kwargs carry no trainer_state).
"""

import asyncio
import inspect
from types import SimpleNamespace

import pytest
import torch
from trl.trainer.utils import is_async_callable

from rods_client.trl import AsyncRodsRewards, RodsRewards


class TrainerLike:
    """Only what RodsRewards reads of GRPOTrainer: ``log_metric`` is its bound ``_log_metric``
    (grpo_trainer.py:1594), whose trainer holds ``model``."""

    def __init__(self):
        self.model = torch.nn.Linear(2, 2)

    def _log_metric(self, name, value):
        pass


def test_an_async_reward_function_gives_an_async_wrapper_trl_awaits():
    async def scored(prompts, completions, **kwargs):
        await asyncio.sleep(0)
        return [0.25 * i for i in range(len(completions))]

    def plain(prompts, completions, **kwargs):
        return [1.0] * len(completions)

    wrapped = RodsRewards(scored)
    assert isinstance(wrapped, AsyncRodsRewards) and is_async_callable(wrapped)
    assert not is_async_callable(RodsRewards(plain)) and type(RodsRewards(plain)) is RodsRewards
    trainer = TrainerLike()
    kwargs = dict(rods_task_id=["a", "a", "b", None], rods_pool_version=[3, 3, 3, 3],
                  trainer_state=SimpleNamespace(global_step=4), log_metric=trainer._log_metric)
    result = wrapped(prompts=["p"] * 4, completions=["c"] * 4, **kwargs)
    assert inspect.iscoroutine(result)
    assert asyncio.run(result) == [0.0, 0.25, 0.5, 0.75]
    assert wrapped.take(5) == [("a", 0.0), ("a", 0.25), ("b", 0.5)]  # step 5 = global_step + 1

    # the model in eval mode: an evaluation batch, not step 5's, and no rods_task_id needed
    trainer.model.eval()
    no_ids = dict(kwargs, rods_task_id=None)
    assert asyncio.run(wrapped(prompts=["p"] * 4, completions=["c"] * 4, **no_ids)) == [0.0, 0.25, 0.5, 0.75]
    assert wrapped.take(5) == [] and wrapped.evaluations == [
        {"afterStep": 4, "rewards": [(None, 0.0), (None, 0.25), (None, 0.5), (None, 0.75)]}]
    trainer.model.train()
    with pytest.raises(ValueError, match="rods_task_id"):
        asyncio.run(wrapped(prompts=["p"] * 4, completions=["c"] * 4, **no_ids))


def test_a_call_without_trainer_state_is_refused_as_trls_async_grpo_makes_it():
    calls = []

    def plain(prompts, completions, **kwargs):
        calls.append(1)
        return [1.0] * len(completions)

    wrapped = RodsRewards(plain)
    with pytest.raises(ValueError, match="no trainer_state.*async GRPO"):
        wrapped(prompts=["p"], completions=["c"], rods_task_id=["a"])
    assert calls == []  # refused before the reward ran: no reward filed under a made-up step
