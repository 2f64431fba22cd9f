"""The Slack front end, ``traindoc slack``: the Bolt bridge (bot.py), an answer as Block Kit (blocks.py) in Slack's
mrkdwn (mrkdwn.py), its options and rate limit, threads and attachments, replies and feedback buttons.

Like every front end it calls the same ``ask()`` (agent/core.py) and only renders its typed answer. Named
``traindoc_slack`` because slack_sdk installs a top-level ``slack`` package."""
