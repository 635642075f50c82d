"""The slime DataSource against the real gateway. slime imports torch, so this checks the data
source against ``SlimeDataSourceContract``, a mirror of the abstract methods of slime's
``DataSource`` (slime/rollout/data_source.py), and drives it as slime's rollout manager does:
``cls(args)``, ``get_samples``, ``add_samples`` for aborted groups, ``save``/``load``, and the
reward post-process hook with each rollout's scored samples."""

import abc
import inspect
from types import SimpleNamespace

from rods_client.slime import PlainSample, RodsDataSource, report_rewards


class SlimeDataSourceContract(abc.ABC):
    @abc.abstractmethod
    def get_samples(self, num_samples: int): ...

    @abc.abstractmethod
    def add_samples(self, samples): ...

    @abc.abstractmethod
    def save(self, rollout_id): ...

    @abc.abstractmethod
    def load(self, rollout_id=None): ...

    @abc.abstractmethod
    def __len__(self) -> int: ...


def make_args(client, tmp_path):
    return SimpleNamespace(n_samples_per_prompt=4, rollout_seed=3, save=str(tmp_path), load=None,
                           rods_gateway_url=client.base_url, rods_token=client.token, rods_campaign=client.campaign,
                           advantage_estimator="grpo", rewards_normalization=True, grpo_std_normalization=True)


def test_meets_the_documented_contract():
    class Probe(RodsDataSource, SlimeDataSourceContract):
        pass

    assert not inspect.isabstract(Probe)
    assert list(inspect.signature(RodsDataSource.__init__).parameters)[:2] == ["self", "args"]


def test_groups_from_the_pool_handed_back_groups_first_and_state_round_trip(slime_client, tmp_path):
    args = make_args(slime_client, tmp_path)
    source = RodsDataSource(args)  # as slime builds it: from args alone
    pool_ids = {t["taskId"] for t in slime_client.fetch_pool()["tasks"]}
    groups = source.get_samples(3)
    assert [len(g) for g in groups] == [4, 4, 4]
    assert [s.group_index for g in groups for s in g] == [0] * 4 + [1] * 4 + [2] * 4
    assert [s.index for g in groups for s in g] == list(range(12))
    for g in groups:
        assert len({s.metadata["rods_task_id"] for s in g}) == 1
        assert g[0].metadata["rods_task_id"] in pool_ids
        assert g[0].prompt[0]["role"] == "user" and g[0].label is not None
    assert len(source) == len(pool_ids)

    source.add_samples(groups[:1])  # an aborted group comes back first
    assert len(source) == len(pool_ids) + 1
    again = source.get_samples(2)
    assert again[0] is groups[0]
    source.save(7)

    restored = RodsDataSource(SimpleNamespace(**{**vars(args), "load": str(tmp_path)}))
    restored.load(7)
    assert (restored.draws, restored.sample_index) == (source.draws, source.sample_index)
    ids = lambda gs: [g[0].metadata["rods_task_id"] for g in gs]  # noqa: E731
    assert ids(restored.get_samples(2)) == ids(source.get_samples(2))  # the same seeded draw


def test_report_rewards_posts_the_rollout_and_normalizes_per_group(slime_client, tmp_path):
    args = make_args(slime_client, tmp_path)
    source = RodsDataSource(args, sample_cls=PlainSample)
    groups = source.get_samples(2)
    values = [[0.0, 1.0, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5]]
    for g, vs in zip(groups, values):
        for s, v in zip(g, vs):
            s.reward, s.rollout_id = v, 0
    raw, normalized = report_rewards(args, groups)
    assert raw == [v for vs in values for v in vs]
    assert abs(sum(normalized[:4])) < 1e-9 and normalized[0] < 0 < normalized[1]
    assert normalized[4:] == [0.0] * 4

    expected = {}
    for g, vs in zip(groups, values):
        expected.setdefault(g[0].metadata["rods_task_id"], []).extend(vs)
    # rollout 0 is rods step 1; the gateway holds exactly this body (same again: a duplicate)
    assert slime_client.report_step(1, expected, policy_version="slime-rollout-0")["duplicate"] is True
