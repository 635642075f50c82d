"""verl with rods choosing each batch: the curriculum sampler draws the tasks of the campaign's
pool from the training dataset and reports every scored step. Needs `pip install ./clients/python`
beside verl. Rows of the training parquet carry their rods task id in `extra_info.rods_task_id`.

    RODS_GATEWAY_URL=http://127.0.0.1:7500 RODS_TOKEN=... RODS_CAMPAIGN=exp-7 \\
    python -m verl.trainer.main_ppo \\
        data.train_files=rods_pool.parquet data.train_batch_size=64 data.dataloader_num_workers=0 \\
        data.sampler.class_path=pkg://rods_client.verl data.sampler.class_name=RodsCurriculumSampler \\
        +data.sampler.rods.steps_per_epoch=100 ...

This script writes that parquet from the current pool (pandas and pyarrow, as verl has them).
verl appends generated tasks that the parquet lacks only through a dataset with
`add_task(entry) -> index`; without one the sampler draws the tasks the parquet holds.
"""

import pandas as pd

from rods_client import RodsClient
from rods_client.verl import verl_row

rows = [verl_row(entry, i) for i, entry in enumerate(RodsClient.from_env().fetch_pool()["tasks"])]
pd.DataFrame(rows).to_parquet("rods_pool.parquet")
print(f"wrote {len(rows)} tasks to rods_pool.parquet")
