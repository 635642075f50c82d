"""The verl curriculum sampler against the real gateway. verl imports torch, so this checks the
sampler against ``VerlCurriculumSamplerContract``, a mirror of the documented abstract methods of
verl's ``AbstractCurriculumSampler`` (verl/experimental/dataset/sampler.py), and drives it the way
verl's trainer does: built from ``data.sampler``, indices batched by ``train_batch_size``,
``update(batch)`` with each scored step (``DataProtoStandIn`` has the fields it reads)."""

import abc
import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Dict, List

import pytest

from rods_client.verl import RodsCurriculumSampler, verl_row


class VerlCurriculumSamplerContract(abc.ABC):
    """verl's AbstractSampler (a torch ``Sampler[int]``) + AbstractCurriculumSampler, as documented."""

    @abc.abstractmethod
    def __init__(self, data_source, data_config): ...

    @abc.abstractmethod
    def __iter__(self): ...

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @abc.abstractmethod
    def update(self, batch) -> None: ...


@dataclass
class DataProtoStandIn:
    """The parts of verl's DataProto that update() reads."""

    batch: Dict[str, Any]
    non_tensor_batch: Dict[str, Any]
    meta_info: Dict[str, Any] = field(default_factory=dict)


class RowsDataset:
    """A map-style dataset of verl rows (``extra_info.rods_task_id``), optionally growable."""

    def __init__(self, task_ids: List[str]):
        self.rows = [{"prompt": f"p{i}", "extra_info": {"rods_task_id": t, "index": i}} for i, t in enumerate(task_ids)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


class GrowableRowsDataset(RowsDataset):
    def add_task(self, entry):
        self.rows.append(verl_row(entry, len(self.rows)))
        return len(self.rows) - 1


def data_config(batch_size=4, steps_per_epoch=2):
    return {"train_batch_size": batch_size, "seed": 1, "dataloader_num_workers": 0,
            "sampler": {"class_path": "pkg://rods_client.verl", "class_name": "RodsCurriculumSampler",
                        "rods": {"steps_per_epoch": steps_per_epoch}}}


def build_like_verl(dataset, config, client):
    # verl's create_rl_sampler: load class_name from class_path, cls(data_source=, data_config=)
    module = importlib.import_module(config["sampler"]["class_path"].removeprefix("pkg://"))
    cls = getattr(module, config["sampler"]["class_name"])
    return cls(data_source=dataset, data_config=config, client=client)


def test_meets_the_documented_contract():
    class Probe(RodsCurriculumSampler, VerlCurriculumSamplerContract):
        pass

    assert not inspect.isabstract(Probe)
    params = list(inspect.signature(RodsCurriculumSampler.__init__).parameters)
    assert params[:3] == ["self", "data_source", "data_config"]
    assert list(inspect.signature(RodsCurriculumSampler.update).parameters) == ["self", "batch"]


def test_samples_pool_tasks_the_dataset_holds(verl_client):
    pool_ids = [t["taskId"] for t in verl_client.fetch_pool()["tasks"]]
    held = pool_ids[: len(pool_ids) // 2]
    dataset = RowsDataset(held + ["not-in-the-pool"])
    sampler = build_like_verl(dataset, data_config(), verl_client)
    assert len(sampler) == 8
    indices = list(sampler)
    assert len(indices) == 8
    drawn = {dataset[i]["extra_info"]["rods_task_id"] for i in indices}
    assert drawn == set(held)  # never the task outside the pool, never a pool task it lacks
    assert sampler.skipped == 2 * (len(pool_ids) - len(held))
    again = build_like_verl(RowsDataset(held + ["not-in-the-pool"]), data_config(), verl_client)
    assert list(again) == indices  # seeded: a restarted run draws the same


def test_appends_pool_tasks_to_a_growable_dataset_and_reports_rewards(verl_client):
    pool_ids = [t["taskId"] for t in verl_client.fetch_pool()["tasks"]]
    dataset = GrowableRowsDataset(pool_ids[:1])
    sampler = build_like_verl(dataset, data_config(batch_size=len(pool_ids), steps_per_epoch=1), verl_client)
    first_batch = list(sampler)
    assert sorted(dataset[i]["extra_info"]["rods_task_id"] for i in first_batch) == sorted(pool_ids)
    assert len(dataset) == len(pool_ids) and sampler.skipped == 0
    added = dataset[len(dataset) - 1]
    assert added["data_source"] == "rods" and added["prompt"][0]["role"] == "user"
    assert added["reward_model"]["ground_truth"] != "None"

    # verl repeats each prompt n times (GRPO) and scores per token: rewards are the row sums.
    rows = [dataset[i] for i in first_batch[:3] for _ in range(2)]
    scores = [[0.0, 0.25], [0.5, 0.0], [1.0, 0.0], [0.0, 0.0], [0.125, 0.125], [0.0, 0.75]]
    batch = DataProtoStandIn(batch={"token_level_scores": scores},
                             non_tensor_batch={"extra_info": [r["extra_info"] for r in rows]},
                             meta_info={"global_steps": 1})
    sampler.update(batch)
    assert sampler.reports[0]["step"] == 1
    assert sampler.reports[0]["answer"] == {**sampler.reports[0]["answer"], "groups": 3, "duplicate": False}
    ids = [rows[0], rows[2], rows[4]]
    expected = {ids[0]["extra_info"]["rods_task_id"]: [0.25, 0.5], ids[1]["extra_info"]["rods_task_id"]: [1.0, 0.0],
                ids[2]["extra_info"]["rods_task_id"]: [0.25, 0.75]}
    assert verl_client.report_step(1, expected, policy_version="verl-step-1")["duplicate"] is True


def test_needs_a_batch_size(verl_client):
    with pytest.raises(ValueError, match="train_batch_size"):
        RodsCurriculumSampler(RowsDataset([]), {"sampler": {}}, client=verl_client)
