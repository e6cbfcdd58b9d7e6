"""The forwarding core (no protocol in here): ``facade.Core`` holds its parts and the entry
points adaptors call, ``lifecycle.LinkLifecycle`` the link lifecycle every adaptor calls,
``ports`` what they are called through and the outcomes they translate to and from."""

from .facade import Core, Hop, Publisher, Subscriber, Upstream
from .peers import TagInUse
from .ports import ACCEPTED, RELEASED, Conditions, Outcome, OutcomeKind, Refused, rejected

__all__ = ["ACCEPTED", "RELEASED", "Conditions", "Core", "Hop", "Outcome", "OutcomeKind", "Publisher", "Refused",
           "Subscriber", "TagInUse", "Upstream", "rejected"]
