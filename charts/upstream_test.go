package charts

import (
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
)

// upstreamValues is the upstream chart's default values file (vatesfr/xenorchestra-cloud-
// controller-manager 1.1.0), relative to the chart as templateArgs takes it.
const upstreamValues = "../testdata/upstream-1.1.0-values.yaml"

// image is this chart's image repository.
const image = "ghcr.io/xenorchestra-k8s/xenorchestra-cloud-controller-manager"

// upstreamControllers are the upstream chart's enabledControllers.
const upstreamControllers = "cloud-node,cloud-node-lifecycle,cloud-node-label-sync"

// checkUpstreamDefaults checks what the upstream defaults give: each key with its upstream
// meaning.
func checkUpstreamDefaults(t *testing.T, o objects) {
	d, c := deployment(t, o)
	spec := d.Spec.Template.Spec
	if *d.Spec.Replicas != 1 {
		t.Errorf("replicas = %d, want upstream's 1", *d.Spec.Replicas)
	}
	if got := mustFlag(t, c.Args, "controllers"); got != upstreamControllers {
		t.Errorf("--controllers=%s, want enabledControllers %s", got, upstreamControllers)
	}
	// logVerbosityLevel 2 is klog's steady-state level: info.
	if got := mustFlag(t, c.Args, "zap-log-level"); got != "info" {
		t.Errorf("--zap-log-level=%s, want info for logVerbosityLevel 2", got)
	}
	// Upstream's config and existingConfigSecret are empty: the config is the test's baseline.
	if p, _ := flagValue(t, c.Args, "config"); configSecretOf(t, o) != "xo-config" || p == "" || len(o.ofKind("Secret")) != 0 {
		t.Error("the config is not the baseline's existingConfigSecret alone")
	}
	if spec.HostNetwork || spec.DNSPolicy != corev1.DNSDefault || spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("hostNetwork %v dnsPolicy %s priorityClassName %s", spec.HostNetwork, spec.DNSPolicy, spec.PriorityClassName)
	}
	wantTolerations := []corev1.Toleration{
		{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.cloudprovider.kubernetes.io/uninitialized", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	if !reflect.DeepEqual(spec.Tolerations, wantTolerations) {
		t.Errorf("tolerations %+v, want upstream's %+v", spec.Tolerations, wantTolerations)
	}
	psc := spec.SecurityContext
	if psc.RunAsUser == nil || *psc.RunAsUser != 10258 || psc.FSGroupChangePolicy == nil || *psc.FSGroupChangePolicy != corev1.FSGroupChangeOnRootMismatch {
		t.Errorf("pod securityContext %+v, want upstream's runAsUser 10258 and fsGroupChangePolicy", psc)
	}
	// What the process runs as: the container's user and group when set, else the pod's.
	uid, gid := psc.RunAsUser, psc.RunAsGroup
	if sc := c.SecurityContext; sc != nil && sc.RunAsUser != nil {
		uid = sc.RunAsUser
	}
	if sc := c.SecurityContext; sc != nil && sc.RunAsGroup != nil {
		gid = sc.RunAsGroup
	}
	if uid == nil || *uid != 10258 || gid == nil || *gid != 10258 {
		t.Errorf("the container runs as user %v group %v, want upstream's podSecurityContext 10258:10258", ptr.Deref(uid, -1), ptr.Deref(gid, -1))
	}
	if got := c.Resources.Requests.Cpu(); got.Cmp(resource.MustParse("10m")) != 0 {
		t.Errorf("CPU request %s, want upstream's 10m", got)
	}
	if len(spec.InitContainers) != 0 || len(spec.HostAliases) != 0 || len(c.Env) != 1 {
		t.Errorf("initContainers %v hostAliases %v env %v, want none but GOMEMLIMIT", spec.InitContainers, spec.HostAliases, c.Env)
	}
}

// TestUpstreamValuesCoverEveryKey checks that the upstream values file names every key the
// upstream chart documents (docs/migration.md lists them), so that the render of it above
// exercises each one.
func TestUpstreamValuesCoverEveryKey(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, upstreamValues))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{
		"affinity", "config", "enabledControllers", "existingConfigSecret", "existingConfigSecretKey", "existingConfigSecretPath",
		"extraArgs", "extraEnvs", "extraVolumeMounts", "extraVolumes", "fullnameOverride", "hostAliases", "image", "imagePullSecrets",
		"initContainers", "logVerbosityLevel", "nameOverride", "nodeSelector", "podAnnotations", "podSecurityContext", "priorityClassName",
		"replicaCount", "resources", "securityContext", "serviceAccount", "tolerations", "updateStrategy", "useDaemonSet", "useHostNetwork",
	}
	if !slices.Equal(keys, want) {
		t.Errorf("upstream values keys:\n got %v\nwant %v", keys, want)
	}
	migration, err := os.ReadFile(filepath.Join(repoRoot, "docs", "migration.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range want {
		if !strings.Contains(string(migration), "`"+k+"`") && !strings.Contains(string(migration), "`"+k+".") {
			t.Errorf("docs/migration.md does not mention the upstream value %s", k)
		}
	}
}

// TestUpstreamValues renders the upstream defaults with one change each, the way a user of the
// upstream chart would set them: accepted keys keep their upstream meaning, the others fail the
// render with a message naming what to use here.
func TestUpstreamValues(t *testing.T) {
	cases := map[string]struct {
		set     []string
		overlay string // a values file laid over the upstream one
		check   func(t *testing.T, o objects)
		wantErr string
	}{
		"useHostNetwork": {set: []string{"useHostNetwork=true"}, check: func(t *testing.T, o objects) {
			d, _ := deployment(t, o)
			if spec := d.Spec.Template.Spec; !spec.HostNetwork || tolerationsOf(spec.Tolerations, notReady) != 1 {
				t.Errorf("hostNetwork %v tolerations %+v, want the host network and not-ready tolerated", spec.HostNetwork, spec.Tolerations)
			}
		}},
		"extraEnvs": {set: []string{"extraEnvs[0].name=XOA_URL", "extraEnvs[0].value=https://xoa.example.com", "extraEnv[0].name=GOGC", "extraEnv[0].value=50"},
			check: func(t *testing.T, o objects) {
				_, c := deployment(t, o)
				var names []string
				for _, e := range c.Env {
					names = append(names, e.Name+"="+e.Value)
				}
				if want := []string{"GOMEMLIMIT=", "GOGC=50", "XOA_URL=https://xoa.example.com"}; !slices.Equal(names, want) {
					t.Errorf("env %v, want %v", names, want)
				}
			}},
		"extraEnvs plain token": {set: []string{"extraEnvs[0].name=XOA_TOKEN", "extraEnvs[0].value=123ABC"}, wantErr: "extraEnvs XOA_TOKEN has a plain value"},
		"initContainers": {set: []string{"initContainers[0].name=wait", "initContainers[0].image=busybox"}, check: func(t *testing.T, o objects) {
			d, _ := deployment(t, o)
			if ic := d.Spec.Template.Spec.InitContainers; len(ic) != 1 || ic[0].Name != "wait" || ic[0].Image != "busybox" {
				t.Errorf("initContainers %+v", ic)
			}
		}},
		"hostAliases": {set: []string{"hostAliases[0].ip=10.0.0.5", "hostAliases[0].hostnames[0]=xoa.lan"}, check: func(t *testing.T, o objects) {
			d, _ := deployment(t, o)
			want := []corev1.HostAlias{{IP: "10.0.0.5", Hostnames: []string{"xoa.lan"}}}
			if got := d.Spec.Template.Spec.HostAliases; !reflect.DeepEqual(got, want) {
				t.Errorf("hostAliases %+v, want %+v", got, want)
			}
		}},
		"logVerbosityLevel 4": {set: []string{"logVerbosityLevel=4"}, check: wantLogLevel("debug")},
		"logVerbosityLevel 0": {set: []string{"logVerbosityLevel=0"}, check: wantLogLevel("info")},
		// Upstream passed --v=logVerbosityLevel before extraArgs; klog keeps the last.
		"--v in extraArgs": {set: []string{"extraArgs[0]=--v=3", "extraArgs[1]=--zap-encoder=console"}, check: func(t *testing.T, o objects) {
			wantLogLevel("debug")(t, o)
			_, c := deployment(t, o)
			if _, ok := flagValue(t, c.Args, "v"); ok {
				t.Errorf("--v passed to the binary: %q", c.Args)
			}
			if got := mustFlag(t, c.Args, "zap-encoder"); got != "console" {
				t.Errorf("--zap-encoder=%s: the other extraArgs were lost", got)
			}
		}},
		"logLevel and logVerbosityLevel": {set: []string{"logLevel=debug"}, wantErr: "set logLevel, or the upstream logVerbosityLevel"},
		"--v without a number":           {set: []string{"extraArgs[0]=--v"}, wantErr: "use logLevel"},
		"enabledControllers": {set: []string{"enabledControllers={cloud-node}"}, check: func(t *testing.T, o objects) {
			_, c := deployment(t, o)
			if got := mustFlag(t, c.Args, "controllers"); got != "cloud-node" {
				t.Errorf("--controllers=%s, want cloud-node", got)
			}
		}},
		"enabledControllers and controllers": {set: []string{"controllers[0]=cloud-node"}, wantErr: "set controllers, or its upstream alias enabledControllers, not both"},
		"enabledControllers route":           {set: []string{"enabledControllers={cloud-node,route}"}, wantErr: "enabledControllers"},
		// The Secret the upstream chart created from config: key config.yaml.
		"upstream Secret": {set: []string{"existingConfigSecret=xenorchestra-cloud-controller-manager"}, check: func(t *testing.T, o objects) {
			if got := configSecretOf(t, o); got != "xenorchestra-cloud-controller-manager" {
				t.Errorf("config from Secret %q", got)
			}
			_, c := deployment(t, o)
			if got := path.Base(mustFlag(t, c.Args, "config")); got != "config.yaml" {
				t.Errorf("--config names %s, want the upstream key config.yaml", got)
			}
		}},
		// Upstream's config is null: Helm cannot --set into it, a values file can.
		"config": {overlay: "config:\n  url: https://xoa.example.com\n  insecure: false\n  token: \"123ABC\"\n", check: func(t *testing.T, o objects) {
			if cl := loadRenderedConfig(t, o).Clusters[0]; cl.URL != "https://xoa.example.com" || cl.Token.Reveal() != "123ABC" {
				t.Errorf("rendered config %+v", cl)
			}
		}},
		"existingConfigSecretPath":          {set: []string{"existingConfigSecret=s", "existingConfigSecretPath=xo.yaml"}, wantErr: "existingConfigSecretPath: remove it"},
		"useDaemonSet":                      {set: []string{"useDaemonSet=true"}, wantErr: "this chart deploys a Deployment only"},
		"upstream image":                    {set: []string{"image.repository=ghcr.io/vatesfr/xenorchestra-cloud-controller-manager"}, wantErr: "is the upstream controller's image"},
		"--cloud-provider":                  {set: []string{"extraArgs[0]=--cloud-provider=xenorchestra"}, wantErr: "--cloud-provider=xenorchestra is a flag of the upstream controller"},
		"--cloud-config":                    {set: []string{"extraArgs[0]=--cloud-config=/etc/xenorchestra/config.yaml"}, wantErr: "use config or existingConfigSecret"},
		"--use-service-account-credentials": {set: []string{"extraArgs[0]=--use-service-account-credentials"}, wantErr: "upstream controller"},
		"--secure-port":                     {set: []string{"extraArgs[0]=--secure-port=10258"}, wantErr: "use metrics.port (HTTPS with TokenReview and SubjectAccessReview"},
		"--authorization-always-allow-paths": {set: []string{"extraArgs[0]=--authorization-always-allow-paths=/healthz"},
			wantErr: "upstream controller"},
		"--leader-elect-resource-name": {set: []string{"extraArgs[0]=--leader-elect-resource-name=cloud-controller-manager-xenorchestra"},
			wantErr: "the Lease is xenorchestra-cloud-controller-manager"},
		"--cluster-name": {set: []string{"extraArgs[0]=--cluster-name=kubernetes"}, wantErr: "upstream controller"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			args := templateArgs(namespace, upstreamValues, append([]string{"image.repository=" + image}, tc.set...)...)
			if tc.overlay != "" {
				args = rawTemplateArgs(namespace, upstreamValues, append([]string{"image.repository=" + image}, tc.set...)...)
				overlay := filepath.Join(t.TempDir(), "values.yaml")
				if err := os.WriteFile(overlay, []byte(tc.overlay), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "-f", overlay)
			}
			out, err := runHelm(t, args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			o, err := parseManifests([]byte(out))
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, o)
			tc.check(t, o)
		})
	}
}

// wantLogLevel checks --zap-log-level.
func wantLogLevel(want string) func(t *testing.T, o objects) {
	return func(t *testing.T, o objects) {
		_, c := deployment(t, o)
		if got := mustFlag(t, c.Args, "zap-log-level"); got != want {
			t.Errorf("--zap-log-level=%s, want %s", got, want)
		}
	}
}

// TestUpstreamSecretLoads checks that the config file of the upstream chart's Secret (its
// config value: url, insecure, token) is read by the binary as is, so the Secret can be reused
// as existingConfigSecret.
func TestUpstreamSecretLoads(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte("url: https://xoa.example.com\ninsecure: false\ntoken: \"123ABC\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if cl := cfg.Clusters[0]; len(cfg.Clusters) != 1 || cl.URL != "https://xoa.example.com" || cl.Token.Reveal() != "123ABC" || cl.Insecure {
		t.Errorf("loaded %+v", cfg)
	}
}
