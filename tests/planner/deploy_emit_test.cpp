// The deployment writers (planner/deploy_emit.h): replica counts, GPU groups,
// argv split from the launch line, and the numbers in each kind of file. The
// schema checks of the emitted YAML are in tests/deploy/plan_emit_test.py.
#include "planner/deploy_emit.h"

#include <gtest/gtest.h>

#include "planner/model_catalog.h"
#include "util/check.h"

namespace parallm::planner {
namespace {

Plan plan_for(const char* model, const char* weights, const char* gpu, int gpus, double concurrency) {
  PlanRequest r;
  r.model = catalog_model(model);
  r.model_ref = r.model.hf_repo;
  r.weights = parse_weight_format(weights);
  r.gpu = catalog_gpu(gpu);
  r.fabric = fabric_from_interconnect(r.gpu, "", gpus, 1);
  r.workload.concurrency = concurrency;
  return make_plan(r);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(DeployEmit, ParsesKindsAndEngines) {
  EXPECT_EQ(parse_emit_kind("k8s"), EmitKind::kK8s);
  EXPECT_EQ(parse_emit_kind("compose"), EmitKind::kCompose);
  EXPECT_EQ(parse_emit_kind("systemd"), EmitKind::kSystemd);
  EXPECT_THROW(parse_emit_kind("helm"), InputError);
  EXPECT_NO_THROW(check_engine("llamacpp"));
  EXPECT_THROW(check_engine("tgi"), InputError);
}

TEST(DeployEmit, ArgvIsOneReplicaOfTheLaunchLine) {
  Plan p = plan_for("llama-2-70b", "fp16", "H100-SXM", 2, 4);
  ASSERT_EQ(p.recommended.tp * p.recommended.pp, 2);
  const auto argv = replica_argv(p, "vllm", "0.0.0.0", 8000, 30);
  ASSERT_GE(argv.size(), 3u);
  EXPECT_EQ(argv[0], "vllm");
  EXPECT_EQ(argv[1], "serve");
  auto value = [&](const std::string& flag) {
    for (size_t i = 0; i + 1 < argv.size(); ++i)
      if (argv[i] == flag) return argv[i + 1];
    return std::string();
  };
  EXPECT_EQ(value("--tensor-parallel-size"), std::to_string(p.recommended.tp));
  EXPECT_EQ(value("--pipeline-parallel-size"), std::to_string(p.recommended.pp));
  EXPECT_EQ(value("--data-parallel-size"), "");  // one replica per process
  EXPECT_EQ(value("--port"), "8000");
  // parallm cannot serve an HF id on H100s (no CUDA backend, not a local
  // file): no argv, one clear error instead of a line that fails to start.
  EXPECT_THROW(replica_argv(p, "parallm", "127.0.0.1", 8001, 30), InputError);
}

TEST(DeployEmit, ReplicasGetConsecutiveGpuGroups) {
  Plan p = plan_for("llama-2-7b", "fp16", "A100-80G", 2, 300);
  ASSERT_GT(p.capacity.replicas, 1);
  const auto groups = replica_gpu_groups(p);
  ASSERT_EQ(static_cast<int64_t>(groups.size()), p.capacity.replicas);
  const int per = p.recommended.tp * p.recommended.pp;
  for (size_t i = 0; i < groups.size(); ++i) {
    ASSERT_EQ(static_cast<int>(groups[i].size()), per);
    EXPECT_EQ(groups[i][0], static_cast<int>(i) * per);
  }
  EmitOptions o;
  const auto units = emit_systemd(p, o);
  ASSERT_EQ(units.size(), groups.size());
  EXPECT_EQ(units[1].name, "parallm-1.service");
  EXPECT_TRUE(has(units[1].text, "Environment=CUDA_VISIBLE_DEVICES=" + std::to_string(per) + "\n"));
  EXPECT_TRUE(has(units[1].text, "--port 8001"));
  const auto compose = emit_compose(p, o);
  ASSERT_EQ(compose.size(), 1u);
  EXPECT_TRUE(has(compose[0].text, "  parallm-1:\n"));
  EXPECT_TRUE(has(compose[0].text, "device_ids: [\"" + std::to_string(per) + "\"]"));
}

TEST(DeployEmit, K8sDeploymentCarriesReplicasAndGpus) {
  Plan p = plan_for("llama-2-70b", "fp16", "H100-SXM", 2, 4);
  EmitOptions o;
  const auto files = emit_k8s(p, o);
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[0].name, "deployment.yaml");
  EXPECT_TRUE(has(files[0].text, "  replicas: " + std::to_string(p.capacity.replicas) + " "));
  EXPECT_TRUE(has(files[0].text, "nvidia.com/gpu: 2\n"));
  EXPECT_TRUE(has(files[2].text, "maxReplicas: " + std::to_string(p.capacity.replicas) + "\n"));
}

TEST(DeployEmit, QuotesYamlStrings) {
  EXPECT_EQ(yaml_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(yaml_quote("--port"), "\"--port\"");
}

}  // namespace
}  // namespace parallm::planner
