"""Long polling (RocketMQ ``broker/longpolling``): pulls held until a message arrives."""

from rmqlab.broker.longpolling.pull_request_hold_service import (ManyPullRequest, PullRequest,
                                                                  PullRequestHoldService)

__all__ = ["ManyPullRequest", "PullRequest", "PullRequestHoldService"]
