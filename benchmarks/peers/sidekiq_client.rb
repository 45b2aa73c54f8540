# Sidekiq's client side for the benchmark, the Ruby twin of client_main in base.py:
#
#   ruby sidekiq_client.rb fill KIND N [--queue Q]       push_bulk; prints seconds
#   ruby sidekiq_client.rb latency COUNT [--warmup W] [--queue Q] [--timeout S]
#                                        [--gap-min S] [--gap-max S]
#
# Prints one line "BENCH-RESULT {json}".
require "json"
require "sidekiq"

# redis-rb 4.8 warns on every SADD that Sidekiq 6.4 sends; the warning is noise here.
Redis.silence_deprecations = true

CLASSES = {"noop" => "Noop", "sleep" => "SleepIO", "stamp" => "Stamp"}.freeze

positional = []
options = {"queue" => "default", "warmup" => "10", "timeout" => "30",
           "gap-min" => "0.1", "gap-max" => "0.6"}
args = ARGV.dup
until args.empty?
  arg = args.shift
  if arg.start_with?("--")
    options[arg.delete_prefix("--")] = args.shift
  else
    positional << arg
  end
end
queue = options["queue"]

def emit(result)
  puts "BENCH-RESULT #{JSON.generate(result)}"
  $stdout.flush
end

case positional[0]
when "fill"
  kind, n = positional[1], Integer(positional[2])
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  Sidekiq::Client.push_bulk("class" => CLASSES.fetch(kind), "queue" => queue,
                            "args" => (0...n).map { |i| [i] })
  emit("seconds" => Process.clock_gettime(Process::CLOCK_MONOTONIC) - started)
when "latency"
  count, warmup = Integer(positional[1]), Integer(options["warmup"])
  timeout = Float(options["timeout"])
  gap_min, gap_max = Float(options["gap-min"]), Float(options["gap-max"])
  latencies = []
  (warmup + count).times do |i|
    sleep(gap_min + rand * (gap_max - gap_min))
    pushed = Time.now.to_f
    Sidekiq::Client.push("class" => "Stamp", "queue" => queue, "args" => [i])
    got = Sidekiq.redis { |c| c.blpop("bench:started", timeout: timeout.ceil) }
    raise "job #{i} did not start within #{timeout} s" if got.nil?
    latencies << Float(got[1]) - pushed if i >= warmup
  end
  emit("latencies" => latencies)
else
  abort "usage: sidekiq_client.rb fill KIND N | latency COUNT"
end
