-- source_cleanup: drop the import view and detach a source database (safe to run again).
drop view if exists source_rows;

detach database if exists dqrelease_source;
