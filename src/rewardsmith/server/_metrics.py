"""Prometheus metrics of the reward server (one registry per app, so apps never share counts)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..types import Score

__all__ = ["ServerMetrics", "CONTENT_TYPE"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                    60.0, 120.0)
UsageSource = Callable[[], dict[str, dict[str, float]]]


class _JudgeUsage(Collector):
    """Judge calls, tokens and cost, read from the engine when Prometheus scrapes."""

    def __init__(self, usage: UsageSource):
        self._usage = usage

    def collect(self) -> Iterator[Metric]:
        calls = GaugeMetricFamily("rewardsmith_judge_calls",
                                  "Judge calls made by this server's engine", labels=["client"])
        cost = GaugeMetricFamily("rewardsmith_judge_cost_usd",
                                 "Judge cost so far in US dollars", labels=["client"])
        usage = GaugeMetricFamily("rewardsmith_judge_usage",
                                  "Every usage figure a judge client reports",
                                  labels=["client", "field"])
        for client, fields in sorted(self._usage().items()):
            calls.add_metric([client], float(fields.get("calls", 0.0)))
            cost.add_metric([client], float(fields.get("cost_usd", fields.get("cost", 0.0))))
            for field, value in sorted(fields.items()):
                if isinstance(value, (int, float)):
                    usage.add_metric([client, field], float(value))
        yield calls
        yield cost
        yield usage


class ServerMetrics:
    """Requests, latency, rollouts by status, queue depth and judge usage."""

    def __init__(self, usage: UsageSource, in_flight: Callable[[], int]):
        self.registry = CollectorRegistry()
        self.requests = Counter("rewardsmith_http_requests", "HTTP requests answered",
                                ["route", "method", "code"], registry=self.registry)
        self.latency = Histogram("rewardsmith_http_request_duration_seconds",
                                 "Time from request to reply", ["route"],
                                 buckets=_LATENCY_BUCKETS, registry=self.registry)
        self.rollouts = Counter("rewardsmith_rollouts_scored", "Rollouts scored, by status",
                                ["status"], registry=self.registry)
        self.rejected = Counter("rewardsmith_requests_rejected",
                                "Requests refused before scoring, by reason", ["reason"],
                                registry=self.registry)
        self.engine_calls = Counter("rewardsmith_engine_calls",
                                    "Engine calls made for requests (concurrent requests share "
                                    "one)", registry=self.registry)
        self.engine_call_requests = Counter("rewardsmith_engine_call_requests",
                                            "Requests scored through those calls",
                                            registry=self.registry)
        queue = Gauge("rewardsmith_rollouts_in_flight", "Rollouts accepted and not yet scored",
                      registry=self.registry)
        queue.set_function(lambda: float(in_flight()))
        self.registry.register(_JudgeUsage(usage))

    def observe(self, route: str, method: str, code: int, seconds: float) -> None:
        self.requests.labels(route, method, str(code)).inc()
        self.latency.labels(route).observe(seconds)

    def engine_call(self, requests: int) -> None:
        self.engine_calls.inc()
        self.engine_call_requests.inc(requests)

    def scored(self, scores: Sequence[Score]) -> None:
        counts: dict[str, int] = {}
        for score in scores:
            counts[score.status.value] = counts.get(score.status.value, 0) + 1
        for status, count in counts.items():
            self.rollouts.labels(status).inc(count)

    def render(self) -> bytes:
        return generate_latest(self.registry)
