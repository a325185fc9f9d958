// The discrete-event loop of fleet.h.
#include "sim/fleet.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <queue>

#include "router/routing_policy.h"
#include "util/check.h"

namespace parallm::sim {

RoutePolicy parse_route_policy(const std::string& name) {
  if (name == "least-outstanding-tokens" || name == "lot") return RoutePolicy::kLeastOutstandingTokens;
  if (name == "round-robin" || name == "rr") return RoutePolicy::kRoundRobin;
  throw InputError("--router '" + name + "': expected least-outstanding-tokens or round-robin");
}

const char* route_policy_name(RoutePolicy p) {
  return p == RoutePolicy::kRoundRobin ? "round-robin" : "least-outstanding-tokens";
}

namespace {

struct Pending {
  double arrival_s = 0;
  int64_t id = 0;
};

// A routed request waiting in its replica's front end (parse, tokenize).
struct Entering {
  double enter_s = 0;
  int64_t id = 0;
  int replica = 0;
  bool operator>(const Entering& o) const { return enter_s != o.enter_s ? enter_s > o.enter_s : id > o.id; }
};

class FleetLoop {
 public:
  FleetLoop(const FleetOptions& o, const StepCost& cost, const SimLoad& load) : o_(o), cost_(cost), load_(load) {
    PARALLM_CHECK(o.dp >= 1);
    for (int k = 0; k < o.dp; ++k)
      replicas_.push_back(std::make_unique<Replica>(o.replica, cost, o.noise_seed + static_cast<uint64_t>(k)));
    loads_.assign(static_cast<size_t>(o.dp), ReplicaLoad{});
    kicked_.assign(static_cast<size_t>(o.dp), 0);
    PARALLM_CHECK(o.front_threads >= 1);
    front_free_s_.assign(static_cast<size_t>(o.dp) * static_cast<size_t>(o.front_threads), 0.0);
    if (o.policy == RoutePolicy::kLeastOutstandingTokens) policy_ = make_routing_policy("least-outstanding-tokens");
    overhead_s_ = cost.overheads().per_request_s;
  }

  FleetResult run() {
    if (load_.kind == LoadKind::kClosedLoop) {
      if (load_.num_requests > 0) {
        requests_.reserve(static_cast<size_t>(load_.num_requests));
        records_.reserve(static_cast<size_t>(load_.num_requests));
        arrivals_.reserve(static_cast<size_t>(load_.num_requests));
      }
      for (int64_t i = 0; i < load_.concurrency && may_issue(0); ++i) issue(0);
    } else {
      requests_ = open_loop_requests(load_);
      arrivals_.reserve(requests_.size());
      for (size_t i = 0; i < requests_.size(); ++i)
        arrivals_.push_back({requests_[i].arrival_s, static_cast<int64_t>(i)});
      records_.resize(requests_.size());
      for (size_t i = 0; i < requests_.size(); ++i) init_record(static_cast<int64_t>(i));
    }
    constexpr double kInf = std::numeric_limits<double>::infinity();
    while (true) {
      const double t_arrival = next_ < arrivals_.size() ? arrivals_[next_].arrival_s : kInf;
      const double t_enter = entering_.empty() ? kInf : entering_.top().enter_s;
      const double t_step = steps_.empty() ? kInf : steps_.top().first;
      const double t_next = std::min({t_arrival, t_enter, t_step});
      // Idle replicas that got work start their step once every event of
      // this instant is in: simultaneous entries share the first step.
      if (!kick_.empty() && t_next > now_) {
        start_kicked();
        continue;
      }
      if (t_next == kInf) break;
      now_ = t_next;
      if (t_arrival == t_next) {
        on_arrival(arrivals_[next_++]);
      } else if (t_enter == t_next) {
        const Entering e = entering_.top();
        entering_.pop();
        on_enter(e);
      } else {
        const int k = steps_.top().second;
        steps_.pop();
        on_step_end(k, t_step);
      }
    }
    return finish();
  }

 private:
  bool may_issue(double now) const {
    return (load_.num_requests == 0 || static_cast<int64_t>(requests_.size()) < load_.num_requests) &&
           (load_.duration_s == 0 || now < load_.duration_s);
  }

  void init_record(int64_t id) {
    loadtest::RequestRecord& r = records_[static_cast<size_t>(id)];
    r.index = id;
    r.start_s = requests_[static_cast<size_t>(id)].arrival_s;
    r.prompt_tokens_sent = requests_[static_cast<size_t>(id)].input_tokens;
  }

  // Closed loop: the client sends its next request the moment one ends, or
  // once it has sent those due before (FleetOptions::client_send_s).
  void issue(double now) {
    const int64_t id = static_cast<int64_t>(requests_.size());
    SimRequest r = draw_lengths(load_, id);
    client_free_s_ = std::max(client_free_s_, now) + o_.client_send_s;
    r.arrival_s = client_free_s_;
    now = r.arrival_s;
    requests_.push_back(r);
    records_.emplace_back();
    init_record(id);
    arrivals_.push_back({now, id});
  }

  int route() {
    if (o_.dp == 1) return 0;
    if (!policy_) {
      const int k = rr_next_;
      rr_next_ = (rr_next_ + 1) % o_.dp;
      return k;
    }
    return policy_->choose(loads_);
  }

  void refresh_load(int k) {
    const Replica& r = *replicas_[static_cast<size_t>(k)];
    loads_[static_cast<size_t>(k)].outstanding_tokens = r.outstanding_tokens();
    loads_[static_cast<size_t>(k)].requests = r.in_flight();
  }

  void start_step(int k, double now) {
    Replica& r = *replicas_[static_cast<size_t>(k)];
    const double d = r.begin_step(now);
    PARALLM_CHECK_MSG(d > 0, "a replica with work scheduled nothing");
    busy_s_ += d;
    steps_.push({now + d, k});
  }

  void start_kicked() {
    for (int k : kick_) {
      kicked_[static_cast<size_t>(k)] = 0;
      if (!replicas_[static_cast<size_t>(k)]->in_step()) start_step(k, now_);
    }
    kick_.clear();
  }

  // Routes the request; it enters the replica's scheduler once one of the
  // replica's front-end threads has handled it (a FIFO queue of
  // FleetOptions::front_threads servers, like serve's --http-threads).
  // NOTE: requests that arrive together within the threads' number enter
  // together and share the next step, as the real step loop finds them.
  void on_arrival(Pending p) {  // by value: issue() may grow arrivals_
    const int k = route();
    double* threads = &front_free_s_[static_cast<size_t>(k) * static_cast<size_t>(o_.front_threads)];
    double* free_s = std::min_element(threads, threads + o_.front_threads);
    *free_s = std::max(*free_s, p.arrival_s) + overhead_s_;
    entering_.push({*free_s, p.id, k});
  }

  void on_enter(const Entering& e) {
    const double now = e.enter_s;
    const SimRequest& q = requests_[static_cast<size_t>(e.id)];
    const int k = e.replica;
    Replica& r = *replicas_[static_cast<size_t>(k)];
    const AdmissionResult a = r.add(static_cast<uint64_t>(e.id), q.input_tokens, q.output_tokens);
    if (a.status != Admission::kOk) {
      loadtest::RequestRecord& rec = records_[static_cast<size_t>(e.id)];
      rec.error = loadtest::ErrorKind::kHttp4xx;
      rec.http_status = 400;
      rec.error_message = a.reason;
      rec.end_s = now;
      ++rejected_;
      on_request_end(now);
      return;
    }
    ++in_flight_;
    max_in_flight_ = std::max(max_in_flight_, in_flight_);
    refresh_load(k);
    if (!r.in_step()) kick(k);
  }

  void kick(int k) {
    if (kicked_[static_cast<size_t>(k)]) return;
    kick_.push_back(k);
    kicked_[static_cast<size_t>(k)] = 1;
  }

  void on_step_end(int k, double now) {
    Replica& r = *replicas_[static_cast<size_t>(k)];
    for (const SeqEvent& ev : r.end_step()) {
      loadtest::RequestRecord& rec = records_[static_cast<size_t>(ev.id)];
      if (ev.token >= 0) {
        if (rec.first_token_s < 0) {
          rec.first_token_s = now;
        } else if (static_cast<int64_t>(ev.id) % itl_stride_ == 0) {
          rec.itl_ms.push_back(static_cast<float>((now - rec.last_token_s) * 1e3));
          if (++itl_kept_ > o_.max_itl_samples) thin_itl();
        }
        rec.last_token_s = now;
        ++rec.chunks_with_text;
      }
      if (ev.finish != FinishReason::kNone) {
        rec.end_s = now;
        rec.usage_prompt_tokens = ev.n_prompt;
        rec.usage_completion_tokens = ev.n_generated;
        --in_flight_;
        on_request_end(now);
      }
    }
    refresh_load(k);
    if (r.has_work()) kick(k);
  }

  void on_request_end(double now) {
    end_s_ = std::max(end_s_, now);
    if (load_.kind == LoadKind::kClosedLoop && may_issue(now)) issue(now);
  }

  // Halves the requests that keep ITL gaps (deterministic: by index).
  void thin_itl() {
    itl_stride_ *= 2;
    itl_kept_ = 0;
    for (loadtest::RequestRecord& rec : records_) {
      if (rec.index % itl_stride_ != 0) std::vector<float>().swap(rec.itl_ms);
      itl_kept_ += static_cast<int64_t>(rec.itl_ms.size());
    }
  }

  FleetResult finish() {
    FleetResult out;
    out.run.records = std::move(records_);
    out.run.start_s = requests_.empty() ? 0 : requests_.front().arrival_s;
    out.run.end_s = end_s_;
    out.run.max_in_flight = max_in_flight_;
    for (const auto& r : replicas_) {
      out.preemptions += r->n_preemptions();
      out.steps += r->n_steps();
    }
    out.rejected = rejected_;
    out.itl_stride = itl_stride_;
    out.busy_s = busy_s_;
    return out;
  }

  const FleetOptions& o_;
  const StepCost& cost_;
  const SimLoad& load_;
  double overhead_s_ = 0;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<ReplicaLoad> loads_;
  std::vector<int> kick_;        // idle replicas given work at now_
  std::vector<uint8_t> kicked_;  // [dp] in kick_
  std::unique_ptr<RoutingPolicy> policy_;
  int rr_next_ = 0;
  std::vector<SimRequest> requests_;              // by request index
  std::vector<loadtest::RequestRecord> records_;  // by request index
  std::vector<Pending> arrivals_;                 // sorted by arrival_s
  std::priority_queue<Entering, std::vector<Entering>, std::greater<>> entering_;
  std::vector<double> front_free_s_;  // [dp, front_threads] when each front-end thread is free
  size_t next_ = 0;
  using StepEnd = std::pair<double, int>;  // (time, replica)
  std::priority_queue<StepEnd, std::vector<StepEnd>, std::greater<>> steps_;
  int64_t in_flight_ = 0, max_in_flight_ = 0, rejected_ = 0, itl_kept_ = 0, itl_stride_ = 1;
  double end_s_ = 0, busy_s_ = 0, now_ = 0;
  double client_free_s_ = 0;  // closed loop: when the client may send its next request
};

}  // namespace

FleetResult simulate_fleet(const FleetOptions& options, const StepCost& cost, const SimLoad& load) {
  FleetLoop loop(options, cost, load);
  return loop.run();
}

}  // namespace parallm::sim
