-- Why: list and search filters on JSON values convert text to inet or numbers; a value that
-- cannot be converted must simply not match, never fail the query. PostgreSQL 15 has no
-- pg_input_is_valid(), so these wrappers catch the conversion error and return null.

create function svc_try_inet(v text) returns inet language plpgsql immutable parallel safe as $$
begin
  return v::inet;
exception when others then
  return null;
end $$;

create function svc_try_numeric(v text) returns numeric language plpgsql immutable parallel safe as $$
begin
  return v::numeric;
exception when others then
  return null;
end $$;

create function svc_try_timestamptz(v text) returns timestamptz language plpgsql stable parallel safe as $$
begin
  return v::timestamptz;
exception when others then
  return null;
end $$;
