-- Up Migration
-- A status call and a dashboard poll counted the campaign's pool members (retired and pruned ones
-- too) and candidates row by row: more rows with every task the campaign ever had. These tables
-- keep the counts, by triggers on the rows they count (every writer, live or maintenance, keeps
-- them right), so the reads take a handful of rows. Replay's schemas copy the counted tables
-- without their triggers: it compares the rows, which the counts only sum up.
create table pool_member_counts (
  campaign_id text not null,
  origin      text not null,
  depth       integer not null,
  -- active, retired or pruned
  state       text not null,
  n           bigint not null,
  primary key (campaign_id, origin, depth, state)
);

create table candidate_counts (
  campaign_id text not null,
  status      text not null,
  n           bigint not null,
  primary key (campaign_id, status)
);

create function rods_member_state(active boolean, removed_rule text) returns text
language sql immutable as $$
  select case when active then 'active' when removed_rule = 'pruned' then 'pruned' else 'retired' end
$$;

create function rods_count_pool_members() returns trigger
language plpgsql as $$
begin
  if tg_op in ('UPDATE', 'DELETE') then
    update pool_member_counts set n = n - 1
     where campaign_id = old.campaign_id and origin = old.origin and depth = old.depth
       and state = rods_member_state(old.active, old.removed_rule);
  end if;
  if tg_op in ('INSERT', 'UPDATE') then
    insert into pool_member_counts as c (campaign_id, origin, depth, state, n)
    values (new.campaign_id, new.origin, new.depth, rods_member_state(new.active, new.removed_rule), 1)
    on conflict (campaign_id, origin, depth, state) do update set n = c.n + 1;
  end if;
  return null;
end;
$$;

create trigger pool_members_counted
  after insert or delete or update of campaign_id, origin, depth, active, removed_rule on pool_members
  for each row execute function rods_count_pool_members();

create function rods_count_candidates() returns trigger
language plpgsql as $$
begin
  if tg_op in ('UPDATE', 'DELETE') then
    update candidate_counts set n = n - 1 where campaign_id = old.campaign_id and status = old.status;
  end if;
  if tg_op in ('INSERT', 'UPDATE') then
    insert into candidate_counts as c (campaign_id, status, n) values (new.campaign_id, new.status, 1)
    on conflict (campaign_id, status) do update set n = c.n + 1;
  end if;
  return null;
end;
$$;

create trigger candidates_counted
  after insert or delete or update of campaign_id, status on candidates
  for each row execute function rods_count_candidates();

-- The counts of campaigns recorded before.
insert into pool_member_counts (campaign_id, origin, depth, state, n)
select campaign_id, origin, depth, rods_member_state(active, removed_rule), count(*)
  from pool_members group by 1, 2, 3, 4;
insert into candidate_counts (campaign_id, status, n)
select campaign_id, status, count(*) from candidates group by 1, 2;

-- Down Migration
drop trigger candidates_counted on candidates;
drop function rods_count_candidates();
drop trigger pool_members_counted on pool_members;
drop function rods_count_pool_members();
drop function rods_member_state(boolean, text);
drop table candidate_counts;
drop table pool_member_counts;
