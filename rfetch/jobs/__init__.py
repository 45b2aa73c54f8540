"""What a job is: the Job class and ``@rfetch.job``, their options, arity checks and
signatures, the payload Sidekiq stores, and the cron schedules a job may carry. Nothing
here talks to Redis; the clients (:mod:`rfetch.push`) and the worker use it."""
