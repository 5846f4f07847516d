"""Which grid owner a job's submitter is: the explicit submitter-to-owner mapping.

A job's submitter is read from its ad (`gridfair.classads.views`): the user part of
`AccountingGroup` (`group.user@domain`, set by `accounting_group` / `accounting_group_user`),
else `User` (`owner@UID_DOMAIN`), else `Owner`. Slots name their owner in `GridOwner`, without
a domain. `SubmitterMap.owner_of` turns one into the other, knowing the pool's owners:

0. a submitter that is an owner's name as it is stays so (slots may name owners with domains);
1. a map file, if given, is looked up first, by the whole submitter (`User1@cs.example`) and
   then by its name without the domain (`User1`): one `submitter owner` pair a line, `#`
   comments; a name not in the file falls through to rule 2;
2. the `@domain` is dropped when it is the pool's UID domain (`uid_domain`; `*`, the
   default, accepts any domain; an empty value keeps every domain) and the rest names an
   owner.

A submitter that names no owner afterwards is kept as it is: it provides no power, and
`gridfair shares` lists it as unmapped.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gridfair.errors import InputError

ANY_DOMAIN = "*"


@dataclass(frozen=True, slots=True)
class SubmitterMap:
    uid_domain: str = ANY_DOMAIN
    names: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_file(cls, path: str | Path, uid_domain: str = ANY_DOMAIN) -> SubmitterMap:
        """A map file of `submitter owner` lines; an InputError names the file and line."""
        names: dict[str, str] = {}
        try:
            text = Path(path).read_text()
        except OSError as error:
            raise InputError(f"{path}: cannot read the submitter map: {error.strerror}") from None
        for number, line in enumerate(text.splitlines(), start=1):
            words = line.partition("#")[0].split()
            if not words:
                continue
            if len(words) != 2:
                raise InputError(f"{path}:{number}: expected 'submitter owner', "
                                 f"got {line.strip()!r}")
            if words[0] in names:
                raise InputError(f"{path}:{number}: submitter {words[0]!r} mapped twice")
            names[words[0]] = words[1]
        return cls(uid_domain, names)

    def owner_of(self, submitter: str, owners: Collection[str]) -> str:
        """The owner `submitter` maps to, or `submitter` itself if it maps to none of
        `owners` (an unmapped submitter)."""
        if submitter in owners:
            return submitter
        name, at, domain = submitter.partition("@")
        for key in (submitter, name):
            if key in self.names:
                return self.names[key]
        if at and name in owners and self.uid_domain in (ANY_DOMAIN, domain):
            return name
        return submitter
