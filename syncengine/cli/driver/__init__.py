"""``syncengine driver``: the agmsg storage-driver contract as a command
(specs/store.md §8, specs/sync-stage1.md §7).

One module per concern: :mod:`.command` registers the command and frames
every op; :mod:`.sync_verbs` holds the Stage-1 and read-state sync verbs;
:mod:`.install` makes the bash driver loadable by a host; :mod:`.server` is
the resident process that answers the bash file's frequent calls, and
:mod:`.rendezvous` says where it is found and how it is started. This file
imports nothing, so loading one of them costs no more than before.
"""
