-- Why: related-object filters run as one SQL condition inside the object list, so their work
-- bounds (1,000 target objects, 10,000 reached objects, 20,000 relations per level) are checked
-- in SQL. Beyond a bound the statement fails with query_canceled, the SQLSTATE the service
-- already answers with 400 "narrow the query" (as for a statement timeout).
create function svc_work_limit(n bigint, max_n bigint, what text) returns boolean language plpgsql as $$
begin
  if n > max_n then
    raise exception 'the query exceeds the work limit of % %; narrow the query', max_n, what
      using errcode = 'query_canceled';
  end if;
  return true;
end $$;
