-- Why: relation rules the inventory schema leaves to this feature. At most one class relation per
-- ordered (from, to) class pair, so "the class relation between two classes" is well defined and
-- a duplicate create is a 409. An object never relates to itself (the traversal excludes its
-- start, so such a row could never be seen). The to-side index serves the to_max_relations count
-- and the reverse direction of traversal; the pair key already serves the from side.

create unique index class_relations_pair_key on class_relations (from_class_id, to_class_id);

alter table object_relations
  add constraint object_relations_not_self check (from_object_id <> to_object_id);

create index object_relations_class_relation_to_idx on object_relations (class_relation_id, to_object_id);
