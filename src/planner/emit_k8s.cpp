// `parallm plan --emit k8s`: a Deployment (replicas = the plan's capacity
// replicas, nvidia.com/gpu = tp x pp per pod, the engine's launch line as the
// container command, /health probes), a Service, an autoscaling/v2 HPA on the
// waiting queue and a PodDisruptionBudget. Names, labels, probe timings and
// HPA behavior follow the hand-written deploy/k8s/ files.
#include "planner/deploy_emit.h"
#include "util/log.h"

namespace parallm::planner {

namespace {

std::string labels(const std::string& indent, const std::string& name) {
  return indent + "app.kubernetes.io/name: " + yaml_quote(name) + "\n" + indent +
         "app.kubernetes.io/component: \"server\"\n";
}

std::string probe(const char* kind, int period_s, int timeout_s, int failures) {
  return strfmt(
      "          %s:\n"
      "            httpGet:\n"
      "              path: \"/health\"\n"
      "              port: \"http\"\n"
      "            periodSeconds: %d\n"
      "            timeoutSeconds: %d\n"
      "            failureThreshold: %d\n",
      kind, period_s, timeout_s, failures);
}

std::string header(const Plan& plan, const EmitOptions& o) {
  const Layout& l = plan.recommended;
  return strfmt("# Written by `parallm plan --emit k8s --engine %s`: %s on %s, tp=%d pp=%d per replica.\n",
                o.engine.c_str(), plan.request.model.name.c_str(), plan.request.gpu.name.c_str(), l.tp, l.pp);
}

}  // namespace

std::vector<EmittedFile> emit_k8s(const Plan& plan, const EmitOptions& o) {
  const int replicas = emit_replicas(plan);
  const int gpus = plan.recommended.tp * plan.recommended.pp;
  const EngineInfo info = engine_info(o.engine);
  const std::vector<std::string> argv = replica_argv(plan, o.engine, "0.0.0.0", o.port, o.drain_s);
  const int pre_stop_s = 5;
  const int grace_s = pre_stop_s + o.drain_s + 10;
  const std::string& n = o.name;
  std::vector<EmittedFile> files;

  std::string d = header(plan, o);
  d += "# The model (or the Hugging Face cache, HF_HOME) is on the PersistentVolumeClaim `" + n +
       "-models`, not defined here.\n";
  d += "apiVersion: \"apps/v1\"\nkind: \"Deployment\"\nmetadata:\n  name: " + yaml_quote(n) + "\n  labels:\n" +
       labels("    ", n);
  d += strfmt("spec:\n  replicas: %d  # plan capacity: replicas for the peak with headroom\n", replicas);
  d += "  revisionHistoryLimit: 5\n  selector:\n    matchLabels:\n" + labels("      ", n);
  d += "  strategy:\n    type: \"RollingUpdate\"\n    rollingUpdate:\n      maxSurge: 1\n      "
       "maxUnavailable: 0\n";
  d += "  template:\n    metadata:\n      labels:\n" + labels("        ", n);
  d += strfmt(
      "    spec:\n      # preStop (%d s) + drain (%d s) + margin.\n      "
      "terminationGracePeriodSeconds: %d\n",
      pre_stop_s, o.drain_s, grace_s);
  d += "      tolerations:\n        - key: \"nvidia.com/gpu\"\n          operator: \"Exists\"\n"
       "          effect: \"NoSchedule\"\n";
  d += "      containers:\n        - name: " + yaml_quote(o.engine) + "\n          image: " + yaml_quote(info.image) +
       "\n          imagePullPolicy: \"IfNotPresent\"\n";
  d += "          command:\n";
  for (const auto& a : argv) d += "            - " + yaml_quote(a) + "\n";
  d += "          env:\n            - name: \"HF_HOME\"\n              value: \"/models/hf\"\n";
  d += strfmt(
      "          ports:\n            - name: \"http\"\n              containerPort: %d\n"
      "              protocol: \"TCP\"\n",
      o.port);
  d += strfmt(
      "          resources:\n            requests:\n              nvidia.com/gpu: %d\n"
      "            limits:\n              nvidia.com/gpu: %d\n",
      gpus, gpus);
  d += "          # /health answers once the model is loaded: up to 20 minutes for it.\n";
  d += probe("startupProbe", 10, 5, 120);
  d += probe("readinessProbe", 5, 3, 2);
  d += probe("livenessProbe", 10, 5, 6);
  d += strfmt(
      "          lifecycle:\n            preStop:\n              exec:\n"
      "                command: [\"sleep\", \"%d\"]\n",
      pre_stop_s);
  d += "          securityContext:\n            allowPrivilegeEscalation: false\n";
  d += "          volumeMounts:\n            - name: \"models\"\n              mountPath: "
       "\"/models\"\n"
       "            - name: \"shm\"\n              mountPath: \"/dev/shm\"\n";
  d += "      volumes:\n        - name: \"models\"\n          persistentVolumeClaim:\n            "
       "claimName: " +
       yaml_quote(n + "-models") + "\n";
  d += "        # NCCL and the engines' worker processes share memory through /dev/shm.\n"
       "        - name: \"shm\"\n          emptyDir:\n            medium: \"Memory\"\n            "
       "sizeLimit: \"16Gi\"\n";
  files.push_back({"deployment.yaml", d});

  std::string s = header(plan, o);
  s += "apiVersion: \"v1\"\nkind: \"Service\"\nmetadata:\n  name: " + yaml_quote(n) + "\n  labels:\n" +
       labels("    ", n);
  s += "spec:\n  type: \"ClusterIP\"\n  selector:\n" + labels("    ", n);
  s += strfmt(
      "  ports:\n    - name: \"http\"\n      port: %d\n      targetPort: \"http\"\n      protocol: "
      "\"TCP\"\n",
      o.port);
  files.push_back({"service.yaml", s});

  std::string h = header(plan, o);
  h += std::string("# Scales on the waiting queue (") + info.queue_metric +
       " from prometheus-adapter, deploy/k8s/prometheus-adapter-config.yaml) between 1 pod and the "
       "plan's replicas.\n";
  h += "apiVersion: \"autoscaling/v2\"\nkind: \"HorizontalPodAutoscaler\"\nmetadata:\n  name: " + yaml_quote(n) +
       "\n  labels:\n    app.kubernetes.io/name: " + yaml_quote(n) + "\n";
  h += "spec:\n  scaleTargetRef:\n    apiVersion: \"apps/v1\"\n    kind: \"Deployment\"\n    "
       "name: " +
       yaml_quote(n) + "\n";
  h += strfmt("  minReplicas: 1\n  maxReplicas: %d\n", replicas);
  h += "  metrics:\n    - type: \"Pods\"\n      pods:\n        metric:\n          name: " +
       yaml_quote(info.queue_metric) +
       "\n        target:\n          type: \"AverageValue\"\n"
       "          averageValue: \"4\"\n";
  h += "  behavior:\n    scaleUp:\n      stabilizationWindowSeconds: 60\n      selectPolicy: "
       "\"Max\"\n"
       "      policies:\n        - type: \"Pods\"\n          value: 2\n          periodSeconds: "
       "120\n"
       "    scaleDown:\n      stabilizationWindowSeconds: 600\n      selectPolicy: \"Min\"\n"
       "      policies:\n        - type: \"Pods\"\n          value: 1\n          periodSeconds: "
       "300\n";
  files.push_back({"hpa.yaml", h});

  std::string p = header(plan, o);
  p += "apiVersion: \"policy/v1\"\nkind: \"PodDisruptionBudget\"\nmetadata:\n  name: " + yaml_quote(n) +
       "\n  labels:\n    app.kubernetes.io/name: " + yaml_quote(n) + "\n";
  p += "spec:\n  maxUnavailable: 1\n  selector:\n    matchLabels:\n" + labels("      ", n);
  files.push_back({"pdb.yaml", p});
  return files;
}

}  // namespace parallm::planner
