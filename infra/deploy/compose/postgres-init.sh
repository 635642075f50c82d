#!/bin/sh
# Bundled PostgreSQL only (compose profile `bundled`): the official image runs this once, on an
# empty data directory, as its superuser. It makes the two roles rods expects (README "Database
# roles"): rods_owner owns the database and runs the migrations, rods_app is the application's
# role; `rods migrate` grants rods_app its privileges. Passwords come from the compose secrets.
set -eu
owner_pw=$(cat /run/secrets/db-owner-password)
app_pw=$(cat /run/secrets/db-app-password)
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v owner_pw="$owner_pw" -v app_pw="$app_pw" <<'SQL'
create role rods_owner login password :'owner_pw';
create role rods_app login password :'app_pw';
create database rods owner rods_owner;
SQL
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname rods <<'SQL'
set role rods_owner;
grant usage on schema public to rods_app;
alter default privileges in schema public grant select, insert, update, delete on tables to rods_app;
alter default privileges in schema public grant usage, select on sequences to rods_app;
SQL
