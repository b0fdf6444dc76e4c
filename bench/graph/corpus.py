"""A synthetic engineering wiki in the shape of the reference design: data stores, services, projects.

One document per data store, service and project. Services use data stores and call each other;
projects depend on services; people maintain services. A document names only its own direct
relations, so a question that spans two of them ("Which projects depend on a service that uses
LedgerDB?") has answers that never mention the entity the question names: dense and keyword
search see one hop, the graph leg sees two.

Deterministic for a seed; nothing is downloaded.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

STORES = ["LedgerDB", "SessionCache", "BlobVault", "MetricsStore", "CatalogIndex", "EventLog"]
SERVICES = [
    "AuthSvc", "PaymentRouter", "InventorySvc", "SearchGateway", "NotificationSvc", "ProfileSvc",
    "PricingEngine", "ShippingSvc", "ReviewSvc", "CatalogSvc", "RecommendationSvc", "AuditSvc",
]  # fmt: skip
PROJECTS = [
    "ProjectAtlas", "ProjectBorealis", "ProjectCobalt", "ProjectDelta", "ProjectEmber", "ProjectFjord",
    "ProjectGranite", "ProjectHarbor", "ProjectIris", "ProjectJuniper", "ProjectKestrel", "ProjectLumen",
    "ProjectMeridian", "ProjectNimbus", "ProjectOrchid", "ProjectPulsar",
]  # fmt: skip
PEOPLE = ["Alice Chen", "Bruno Diaz", "Chiara Rossi", "Dmitri Volkov", "Esther Okafor", "Farid Haddad"]
PURPOSES = [
    "customer sign-in and sessions", "card payments and refunds", "stock levels in the warehouses", "product search",
    "emails and push messages", "customer profiles", "price calculation", "parcel tracking", "product reviews",
    "the product catalog", "personal recommendations", "the audit trail",
]  # fmt: skip
PROJECT_GOALS = [
    "a new customer portal", "the mobile checkout", "a partner marketplace", "the loyalty programme", "self-service returns",
    "a wholesale ordering site", "the in-store kiosk", "subscription boxes", "the gift card launch", "a seller dashboard",
    "the holiday campaign site", "the delivery tracker app", "a price comparison widget", "the support chatbot",
    "the order history redesign", "a reporting console",
]  # fmt: skip
FILLER = [
    "The team reviews its service level objectives every quarter.",
    "Deployments run through the shared release pipeline on weekdays.",
    "Incidents are tracked in the on-call runbook and discussed in the weekly review.",
    "Requests and latencies are exported to the monitoring dashboards.",
    "Configuration lives in the platform repository next to the deployment manifests.",
    "Capacity is planned before every seasonal peak.",
]


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    #: document ids that answer it
    relevant: frozenset[str]
    kind: str


@dataclass(slots=True)
class Wiki:
    documents: dict[str, str] = field(default_factory=dict)
    uses: dict[str, list[str]] = field(default_factory=dict)
    calls: dict[str, list[str]] = field(default_factory=dict)
    depends: dict[str, list[str]] = field(default_factory=dict)
    maintainer: dict[str, str] = field(default_factory=dict)

    def questions(self) -> list[Question]:
        """Two-hop questions whose answers do not name the entity asked about."""
        out = []
        for store in STORES:
            services = {s for s, stores in self.uses.items() if store in stores}
            projects = {p for p, deps in self.depends.items() if services & set(deps)}
            if 1 <= len(projects) <= 4:
                out.append(Question(f"Which projects depend on a service that uses {store}?", frozenset(_doc(p) for p in projects), "projects-via-store"))
        for project, services in self.depends.items():
            out.append(Question(f"Who maintains the services that {project} depends on?", frozenset(_doc(s) for s in services), "maintainers-of-dependencies"))
        return out


def _doc(name: str) -> str:
    return name.lower()


def make_wiki(seed: int = 7) -> Wiki:
    rng = random.Random(seed)
    wiki = Wiki()
    for i, service in enumerate(SERVICES):
        wiki.uses[service] = rng.sample(STORES, 1 + (rng.random() < 0.25))
        others = [s for s in SERVICES if s != service]
        wiki.calls[service] = rng.sample(others, 1) if rng.random() < 0.4 else []
        wiki.maintainer[service] = PEOPLE[i % len(PEOPLE)]
    for project in PROJECTS:
        wiki.depends[project] = rng.sample(SERVICES, 1 + (rng.random() < 0.4))
    for store in STORES:
        kind = rng.choice(["relational", "key-value", "object", "time-series", "append-only"])
        wiki.documents[_doc(store)] = (
            f"{store} is a {kind} data store run by the platform group. It is replicated across two zones and backed up nightly. "
            + " ".join(rng.sample(FILLER, 2))
        )
    for service, purpose in zip(SERVICES, PURPOSES, strict=True):
        stores = wiki.uses[service]
        text = f"{service} handles {purpose}. {service} uses {' and '.join(stores)} for its data. "
        if wiki.calls[service]:
            text += f"For some requests {service} calls {wiki.calls[service][0]}. "
        text += f"{service} is maintained by {wiki.maintainer[service]}, the service owner. " + " ".join(rng.sample(FILLER, 2))
        wiki.documents[_doc(service)] = text
    for project, goal in zip(PROJECTS, PROJECT_GOALS, strict=True):
        deps = wiki.depends[project]
        wiki.documents[_doc(project)] = (
            f"{project} builds {goal}. {project} depends on {' and '.join(deps)}. "
            f"The project ships a release every {rng.choice([2, 3, 4])} weeks. " + " ".join(rng.sample(FILLER, 2))
        )
    return wiki
