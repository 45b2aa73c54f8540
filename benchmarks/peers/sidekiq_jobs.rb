# Sidekiq's benchmark jobs: the same three kinds as every peer's
# (benchmarks/peers/base.py). Run as `sidekiq -r ./sidekiq_jobs.rb -c 10`; Sidekiq reads
# REDIS_URL from the environment.
require "sidekiq"

# redis-rb 4.8 warns on every SADD that Sidekiq 6.4 sends; the warning is noise here.
Redis.silence_deprecations = true

# Quiet setting of benchmarks.compare (--logging quiet): Sidekiq's per-job "start" and
# "done" INFO lines off, its other lines (WARN and above) kept. Default: Sidekiq's INFO.
Sidekiq.logger.level = Logger::WARN if ENV["BENCH_QUIET"] == "1"

# INCRBY bench:done 1 (as redis-py sends for incr).
class Noop
  include Sidekiq::Worker

  def perform(_n)
    Sidekiq.redis { |c| c.incrby("bench:done", 1) }
  end
end

# Sleeps 1 ms (simulated I/O), then INCR bench:done.
class SleepIO
  include Sidekiq::Worker

  def perform(_n)
    sleep(0.001)
    Sidekiq.redis { |c| c.incrby("bench:done", 1) }
  end
end

# RPUSH bench:started with the time the job started (float epoch seconds).
class Stamp
  include Sidekiq::Worker

  def perform(_n)
    Sidekiq.redis { |c| c.rpush("bench:started", Time.now.to_f.to_s) }
  end
end
