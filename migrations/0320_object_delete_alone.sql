-- An object delete in one statement (src/db/objects.ts deleteObjectIfClassUnchanged) deletes only an
-- object that has no relations in its statement's snapshot, and writes only the object's own audit
-- event. A relation to or from that object committed after the snapshot was taken (while the
-- statement waited for the object's lock) would still be deleted with the object (on delete
-- cascade), without its event. The statement marks its transaction (svc.object_delete_alone), and
-- a relation deleted in such a transaction fails it: nothing is written, and the delete goes the
-- two-statement way, which locks the object before it reads its relations.
create function object_relations_refuse_unseen_delete() returns trigger
language plpgsql as $$
begin
  if current_setting('svc.object_delete_alone', true) = 'on' then
    raise exception 'a relation of the object appeared while it was deleted' using errcode = 'SV001';
  end if;
  return old;
end
$$;

create trigger object_relations_refuse_unseen_delete before delete on object_relations
  for each row execute function object_relations_refuse_unseen_delete();
