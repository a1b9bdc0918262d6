"""Slots: what a project has exactly one (or one main) value of, and the values each can take.

A project deploys to one place, runs CI on one provider, keeps its data in one main database, installs
packages with one manager; a module has an owner. When a new memory names a value of a slot and a
current one names another value of the same slot ("Our deploy target is now Google Cloud Run" /
"We moved deployment from Heroku to Fly.io"), the old one may be stale even when the two share almost
no words, and their embeddings are not close either. The engine uses this module to find such
memories (`search_phrases`: a keyword query for the other values) and to say why they are related
(`changed_slot`). It never retires anything on this evidence alone: a project may run two databases.

The lexicon below lists well-known tools and services of each slot (lower case, as `text.normalise`
leaves them; a value of several words is matched as a phrase). It was written by hand for issue 31,
after the pair set tests/data/slot_changes.yaml, from general knowledge of each category, with more
values than that set names; bench/slot_changes.py measures it. Owners of modules are people, not
listed values: `changed_slot` reads "X owns Y" / "Y is X's responsibility" forms instead.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..text import normalise, query_terms, swapped_spans

SLOTS: dict[str, tuple[str, ...]] = {
    "deploy target": (
        "heroku", "fly.io", "render", "railway", "vercel", "netlify", "google cloud run", "cloud run", "app engine",
        "elastic beanstalk", "aws lambda", "ecs", "fargate", "kubernetes", "k8s", "gke", "eks", "aks", "nomad",
        "digitalocean", "droplet", "linode", "hetzner", "cloudflare workers", "cloudflare pages", "github pages",
        "azure app service", "dokku", "coolify", "kamal", "capistrano", "ec2", "lightsail", "openshift",
    ),
    "cloud provider": (
        "aws", "amazon web services", "google cloud", "gcp", "azure", "digitalocean", "hetzner", "ovh",
        "oracle cloud", "linode", "scaleway", "ibm cloud", "alibaba cloud",
    ),
    "CI provider": (
        "github actions", "gitlab ci", "circleci", "travis ci", "travis", "jenkins", "buildkite", "drone",
        "teamcity", "bamboo", "azure pipelines", "bitbucket pipelines", "semaphore", "appveyor", "woodpecker",
        "codemagic", "bitrise", "concourse", "tekton", "argo workflows", "google cloud build", "cloud build",
    ),
    "database": (
        "postgresql", "postgres", "mysql", "mariadb", "sqlite", "mongodb", "cockroachdb", "dynamodb",
        "cassandra", "scylladb", "oracle", "sql server", "mssql", "firestore", "supabase", "planetscale",
        "neon", "couchdb", "couchbase", "fauna", "tidb", "yugabytedb", "clickhouse", "duckdb", "aurora",
        "cosmos db", "spanner", "neo4j", "surrealdb", "timescaledb",
    ),
    "package manager": (
        "npm", "pnpm", "yarn", "bun", "pip", "pipenv", "poetry", "uv", "conda", "pdm", "hatch", "rye",
        "cargo", "bundler", "composer", "maven", "gradle", "nuget", "go modules", "homebrew",
    ),
    "error tracker": (
        "sentry", "rollbar", "bugsnag", "honeybadger", "airbrake", "raygun", "glitchtip", "trackjs",
        "datadog error tracking", "new relic errors",
    ),
    "logging": (
        "papertrail", "datadog", "loggly", "logz.io", "splunk", "elk", "kibana", "loki", "grafana loki",
        "cloudwatch", "stackdriver", "sumo logic", "graylog", "better stack", "logtail", "new relic",
        "honeycomb", "axiom",
    ),
    "monitoring": (
        "pingdom", "checkly", "uptimerobot", "uptime robot", "statuscake", "better uptime", "uptime kuma",
        "datadog", "new relic", "prometheus", "grafana", "nagios", "zabbix", "victoriametrics", "statsd",
    ),
    "email provider": (
        "sendgrid", "postmark", "mailgun", "amazon ses", "ses", "mailchimp", "mandrill", "sparkpost",
        "mailjet", "resend", "brevo", "sendinblue", "convertkit", "buttondown",
    ),
    "auth provider": (
        "auth0", "clerk", "okta", "cognito", "firebase auth", "supabase auth", "keycloak", "ory",
        "workos", "stytch", "fusionauth", "authentik", "azure ad", "entra id",
    ),
    "cache": ("redis", "memcached", "valkey", "keydb", "dragonfly", "varnish", "hazelcast"),
    "queue": (
        "celery", "rabbitmq", "sidekiq", "resque", "kafka", "sqs", "amazon sqs", "temporal", "rq", "bullmq",
        "bull", "nats", "pub/sub", "google pub/sub", "activemq", "beanstalkd", "dramatiq", "huey", "inngest",
        "airflow", "dagster", "prefect",
    ),
    "feature flags": (
        "launchdarkly", "unleash", "flagsmith", "growthbook", "split.io", "configcat", "optimizely",
        "statsig", "flipt",
    ),
    "linter": (
        "flake8", "ruff", "pylint", "eslint", "biome", "oxlint", "tslint", "jshint", "rubocop", "golangci-lint",
        "clippy", "stylelint", "pyflakes", "standardjs",
    ),
    "formatter": (
        "black", "ruff format", "yapf", "autopep8", "prettier", "biome", "dprint", "gofmt", "rustfmt",
        "clang-format",
    ),
    "test runner": (
        "jest", "vitest", "mocha", "jasmine", "ava", "karma", "pytest", "unittest", "nose", "playwright",
        "cypress", "rspec", "minitest", "junit", "testng", "bun test",
    ),
    "bundler": (
        "webpack", "vite", "rollup", "parcel", "esbuild", "turbopack", "rspack", "browserify", "snowpack",
        "gulp", "grunt",
    ),
    "ORM": (
        "sqlalchemy", "django orm", "peewee", "tortoise", "sqlmodel", "prisma", "typeorm", "sequelize",
        "drizzle", "knex", "mikro-orm", "activerecord", "hibernate", "gorm", "diesel", "ecto",
    ),
    "container registry": (
        "docker hub", "github container registry", "ghcr", "ecr", "amazon ecr", "gcr", "google container registry",
        "artifact registry", "quay", "harbor", "azure container registry", "gitlab container registry",
    ),
    "secret manager": (
        "hashicorp vault", "vault", "aws secrets manager", "secrets manager", "1password", "doppler",
        "infisical", "sops", "google secret manager", "azure key vault", "bitwarden", "lastpass",
    ),
    "search engine": (
        "elasticsearch", "opensearch", "typesense", "meilisearch", "algolia", "solr", "sphinx search",
        "vespa", "quickwit",
    ),
    "payments": (
        "stripe", "braintree", "paypal", "adyen", "square", "paddle", "lemon squeezy", "mollie", "checkout.com",
        "chargebee", "recurly",
    ),
    "analytics": (
        "mixpanel", "posthog", "amplitude", "google analytics", "segment", "heap", "plausible", "fathom",
        "matomo", "pendo", "umami",
    ),
    "CDN": ("cloudfront", "cloudflare", "fastly", "akamai", "bunny", "bunnycdn", "keycdn", "jsdelivr"),
    "object storage": (
        "s3", "amazon s3", "cloudflare r2", "r2", "google cloud storage", "gcs", "azure blob storage",
        "backblaze b2", "b2", "minio", "wasabi", "digitalocean spaces",
    ),
    "docs site": (
        "sphinx", "mkdocs", "mkdocs material", "docusaurus", "gitbook", "read the docs", "readthedocs",
        "jekyll", "hugo", "vitepress", "nextra", "mintlify", "astro starlight", "starlight",
    ),
    "issue tracker": (
        "jira", "linear", "github issues", "gitlab issues", "youtrack", "asana", "trello", "clickup",
        "shortcut", "clubhouse", "pivotal tracker", "notion", "monday",
    ),
    "team chat": ("slack", "discord", "microsoft teams", "teams", "mattermost", "zulip", "rocket.chat", "element"),
    "on-call tool": ("pagerduty", "opsgenie", "victorops", "splunk on-call", "incident.io", "rootly", "firehydrant"),
    "infrastructure as code": (
        "terraform", "opentofu", "pulumi", "cloudformation", "aws cdk", "cdk", "ansible", "chef", "puppet",
        "saltstack", "crossplane", "bicep",
    ),
    "migration tool": (
        "flyway", "liquibase", "alembic", "django migrations", "knex migrations", "prisma migrate", "atlas",
        "goose", "sqitch", "dbmate",
    ),
    "HTTP client": ("requests", "httpx", "aiohttp", "urllib3", "axios", "fetch", "got", "ky", "superagent", "okhttp"),
    "state management": (
        "redux", "zustand", "mobx", "recoil", "jotai", "pinia", "vuex", "xstate", "valtio", "ngrx",
        "redux toolkit",
    ),
    "frontend framework": (
        "react", "vue", "angular", "svelte", "sveltekit", "solid", "preact", "ember", "next.js", "nuxt",
        "remix", "astro", "gatsby",
    ),
    "web framework": (
        "django", "flask", "fastapi", "rails", "ruby on rails", "express", "nestjs", "laravel", "spring boot",
        "phoenix", "gin", "echo", "fiber", "starlette", "hono",
    ),
    "mobile framework": ("react native", "flutter", "swiftui", "jetpack compose", "ionic", "xamarin", "expo",
                         "capacitor"),
    "build tool": ("make", "bazel", "buck", "pants", "nx", "turborepo", "lerna", "rush", "cmake", "meson", "ninja",
                   "just"),
    "container runtime": ("docker", "podman", "containerd", "colima", "orbstack", "rancher desktop"),
    "version control host": ("github", "gitlab", "bitbucket", "gitea", "forgejo", "codeberg", "sourcehut",
                             "azure repos"),
}

# A word that is a value only in context: "make" the verb, "just" the adverb, "go", "ses" ...
_AMBIGUOUS = frozenset({"make", "just", "fetch", "got", "echo", "element", "teams", "monday", "vault", "square",
                        "heap", "bull", "segment", "spanner", "fauna", "atlas", "neon", "render", "drone",
                        "solid", "chef", "puppet", "ninja", "rush", "gin", "fiber", "shortcut", "ses", "r2", "b2",
                        "bunny", "ava", "nose", "karma", "hugo", "ory", "harbor", "quay", "sops", "ecs",
                        "requests", "rq", "huey", "bun", "black", "linear", "notion", "docker",
                        "expo", "remix", "astro", "ember", "phoenix", "react", "vue", "oracle", "aurora"})


@lru_cache(maxsize=1)
def _lexicon() -> tuple[re.Pattern[str], dict[str, list[str]]]:
    """One pattern matching any value as whole words (longest first, so "google cloud run" is read
    before "google cloud" and "cloud run"), and the slots of each value."""
    slots_of: dict[str, list[str]] = {}
    for slot, values in SLOTS.items():
        for value in values:
            slots_of.setdefault(value, []).append(slot)
    bodies = [r"\s+".join(re.escape(part) for part in value.split())
              for value in sorted(slots_of, key=len, reverse=True)]
    return re.compile(rf"(?<![\w.-])(?:{'|'.join(bodies)})(?![\w-]|\.\w)"), slots_of


_USE_CONTEXT = re.compile(r"(?:\b(?:with|on|to|in|via|through|by|from|use|uses|using|is|are|now|onto|into|"
                          r"switched|moved|migrated|adopted|chose|picked)\s+)$")


@lru_cache(maxsize=4096)
def values_of(text: str) -> dict[str, frozenset[str]]:
    """{slot: {values}} that `text` names. An ambiguous value counts only when written as a name
    (with a capital letter: "Render", "Linear") or right after a word of use ("deploy with render")."""
    pattern, slots_of = _lexicon()
    norm = normalise(text)
    found: dict[str, set[str]] = {}
    for match in pattern.finditer(norm):
        value = " ".join(match.group().split())
        if value in _AMBIGUOUS and not _named(text, value) and not _USE_CONTEXT.search(norm[:match.start()]):
            continue
        for slot in slots_of[value]:
            found.setdefault(slot, set()).add(value)
    return {slot: frozenset(values) for slot, values in found.items()}


def _named(cased: str, value: str) -> bool:
    """Whether `value` appears in `cased` written as a name: with a capital letter, not at the
    start of the text (where every word has one)."""
    for match in re.finditer(rf"(?<![\w.-]){re.escape(value)}(?![\w-])", cased, re.IGNORECASE):
        if not cased[match.start()].isupper():
            continue
        # At the start every word has a capital: a name there is followed by its verb ("Bun installs
        # our packages"), an imperative by its object ("Render the page").
        following = cased[match.end():].split()[:1]
        if match.start() > 0 or (following and re.fullmatch(r"[a-z]+s|is|are|was|now", following[0])):
            return True
    return False


# Who holds a module: "Priya owns the billing module", "billing is Marco's responsibility now",
# "Tomasz is the new owner of authentication", "questions about the auth module go to Lena".
_OWNERS = [re.compile(p) for p in (
    r"^(?P<who>[\w' -]{1,40}?) (?:owns|maintains|is responsible for|looks after|took over|has taken over) "
    r"(?:the )?(?P<what>.+?)(?: from .+?)?(?: now)?$",
    r"^(?:the )?(?P<what>.+?) (?:is|are) (?:now )?(?:owned|maintained|looked after) by (?P<who>.+?)(?: now)?$",
    r"^(?:the )?(?P<what>.+?) (?:is|are) (?:now )?(?P<who>[\w-]+)'s (?:responsibility|job|area)(?: now)?$",
    r"^(?P<who>.+?) (?:is|are) (?:now )?the (?:new )?(?:owner|maintainer|code owner)s? of (?:the )?"
    r"(?P<what>.+?)(?: now)?$",
    r"^(?:questions|issues|reviews|changes) (?:about|for|to|of) (?:the )?(?P<what>.+?) go to (?P<who>.+?)$",
)]
# A name with a version: "Python 3.11", "Node 18", "Postgres 15", "React v17".
_VERSIONED = re.compile(r"(?<![\w.-])(?P<name>[a-z][a-z0-9+#.-]*[a-z+#]) v?(?P<version>\d+(?:\.\d+)*)(?!\w|\.\d)")
_NOT_NAMES = frozenset("every each about around after before within than at in on for of the a an to by is are "
                       "was last next top step phase page chapter item number version".split())


def _owner(text: str) -> tuple[str, set[str]] | None:
    """(holder, stems of the module) if `text` says who holds a module."""
    from ..text import stems

    plain = normalise(text).rstrip(".!")
    for pattern in _OWNERS:
        match = pattern.match(plain)
        if match:
            what = stems(match["what"]) - {"modul", "servic", "code", "area", "compon"}
            return match["who"].removeprefix("the ").strip(), what or stems(match["what"])
    return None


def _same_thing(a: set[str], b: set[str]) -> bool:
    """Whether two sets of stems share one, or one is the short form of the other ("auth" / "authent")."""
    return bool(a & b) or any(len(x) >= 4 and (y.startswith(x) or x.startswith(y)) for x in a for y in b)


def changed_slot(old_text: str, new_text: str) -> str | None:
    """A short reason if `new_text` names a value of a slot that `old_text` names another value of
    ("deploy target: heroku, fly.io -> google cloud run"), another version of the same name ("python:
    3.11 -> 3.12") or another holder of the same module ("billing: priya -> marco"), else None."""
    old, new = values_of(old_text), values_of(new_text)
    for slot in sorted(set(old) & set(new)):
        gone, came = old[slot] - new[slot], new[slot] - old[slot]
        if gone and came:
            return f"another value of the same slot ({slot}: {', '.join(sorted(gone))} -> {', '.join(sorted(came))})"
    versions = [{m["name"]: m["version"] for m in _VERSIONED.finditer(normalise(t)) if m["name"] not in _NOT_NAMES}
                for t in (old_text, new_text)]
    # "The mailer component is owned by team 8" / "The cache component ... team 9": the number is one
    # of two values a template swaps, another fact, not another version of "team".
    for name in sorted(set(versions[0]) & set(versions[1])) if swapped_spans(old_text, new_text) < 2 else ():
        if versions[0][name] != versions[1][name]:
            return f"another version of {name} ({versions[0][name]} -> {versions[1][name]})"
    owners = _owner(old_text), _owner(new_text)
    if owners[0] and owners[1] and owners[0][0] != owners[1][0] and _same_thing(owners[0][1], owners[1][1]):
        return f"another holder of the same module ({owners[0][0]} -> {owners[1][0]})"
    return None


def slot_key(reason: str) -> str:
    """What a `changed_slot` reason is about, without its values ("package manager", "version of
    python", "holder"): one memory per slot is shown."""
    slot = re.match(r"another value of the same slot \((?P<slot>[^:]+):", reason)
    version = re.match(r"another version of (?P<name>\S+)", reason)
    return slot["slot"] if slot else f"version of {version['name']}" if version else "holder"


def search_phrases(text: str, limit: int = 40) -> list[list[str]]:
    """The other values of every slot `text` names, each as the list of its sub-tokens (a phrase to
    search: "fly.io" -> ["fly", "io"]), at most `limit`: the keyword query that finds a current
    memory naming the value this text may replace. An ambiguous value ("black", "make") finds texts
    using it as a word too; `changed_slot` then tells them apart."""
    named = values_of(text)
    phrases: list[list[str]] = []
    for slot, values in named.items():
        for value in SLOTS[slot]:
            if value in values:
                continue
            tokens = [t for term in query_terms(value) for t in term]
            if tokens and tokens not in phrases:
                phrases.append(tokens)
    return phrases[:limit]
