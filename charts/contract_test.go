package charts

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
)

// contractToken stands for every token the rendered Pod would read from a Secret.
const contractToken = "contract-test-token-0123456789abcdefghij"

// contractCase is a render: a ci values file or none, and --set / --set-json flags. key is the
// value a refusal at render time must name; renders says the values are valid, so that a chart
// refusing everything cannot pass.
type contractCase struct {
	values  string
	set     []string
	json    []string
	key     string
	renders bool
}

// contractCases are the ci values files and, over the values the chart validates, the values
// either side of each rule of the binary's and their combinations with the other values.
func contractCases(t *testing.T) []contractCase {
	var cases []contractCase
	for _, f := range ciValuesFiles(t) {
		cases = append(cases, contractCase{values: f, renders: true})
	}
	selfManaged := []string{"webhook.certificates.mode=selfManaged", "config.url=https://xo.example.com", "config.token=" + contractToken}
	valid := map[string]bool{"1h 1s": true, "1h 59m": true, "8760h 1s": true, "8760h 59m": true, "8760h 1h": true, "8760h 168h": true,
		"8760h 8759h59m59s": true, "90m 1s": true, "90m 59m": true, "90m 1h": true, "1h30m 1s": true, "1h30m 59m": true, "1h30m 1h": true}
	for _, ca := range []string{"0s", "-1h", "1h", "8760h", "90m", "1h30m"} {
		for _, cert := range []string{"0s", "1s", "59m", "1h", "168h", "8759h59m59s", "9000h"} {
			cases = append(cases, contractCase{
				set:     append(selfManaged, "webhook.certificates.selfManaged.caDuration="+ca, "webhook.certificates.selfManaged.certDuration="+cert),
				key:     "webhook.certificates.selfManaged",
				renders: valid[ca+" "+cert],
			})
		}
	}
	clusters := []string{"config.clusters[0].url=https://a.example.com", "config.clusters[0].tokenSecretRef.name=xo", "config.clusters[0].tokenSecretRef.key=token"}
	for _, single := range []string{"url=https://xo.example.com", "token=" + contractToken, "insecure=true", "name=xo", "region=eu", "caBundle=x", "tokenFile=/t"} {
		cases = append(cases, contractCase{set: append(clusters[:3:3], "config."+single), key: "config." + strings.Split(single, "=")[0]})
	}
	for _, env := range []string{"XOA_URL", "XOA_TOKEN", "XOA_INSECURE"} {
		for _, list := range []string{"extraEnv", "extraEnvs"} {
			cases = append(cases, contractCase{set: clusters, key: list,
				json: []string{list + `=[{"name":"` + env + `","valueFrom":{"secretKeyRef":{"name":"x","key":"y"}}}]`}})
		}
	}
	for _, env := range []string{"XOA_USER", "XOA_PASSWORD"} {
		for _, list := range []string{"extraEnv", "extraEnvs"} {
			for _, value := range []string{`"value":"x"`, `"valueFrom":{"secretKeyRef":{"name":"x","key":"y"}}`} {
				cases = append(cases, contractCase{set: []string{"config.url=https://xo.example.com", "config.token=" + contractToken}, key: list,
					json: []string{list + `=[{"name":"` + env + `",` + value + `}]`}})
			}
		}
	}
	single := []string{"config.url=https://xo.example.com", "config.token=" + contractToken}
	for _, args := range [][]string{
		{"--leader-elect-lease-duration=1s"}, {"--leader-elect-lease-duration=10s"}, {"--leader-elect-lease-duration=11s"},
		{"--leader-elect-renew-deadline=15s"}, {"--leader-elect-renew-deadline=3s"}, {"--leader-elect-retry-period=10s"},
		{"--leader-elect-retry-period=0s"}, {"--leader-elect-retry-period=500ms"},
		{"--leader-elect-lease-duration=60s", "--leader-elect-renew-deadline=40s", "--leader-elect-retry-period=5s"},
		{"--leader-elect-lease-duration=1m", "--leader-elect-renew-deadline=1m"},
		{"--leader-elect-lease-duration=1h0m", "--leader-elect-renew-deadline=59m59.5s"},
	} {
		valid := strings.HasSuffix(args[0], "=11s") || strings.HasSuffix(args[0], "=3s") || strings.HasSuffix(args[0], "=500ms") || len(args) == 3 ||
			strings.HasSuffix(args[0], "=1h0m")
		cases = append(cases, contractCase{json: []string{`extraArgs=["` + strings.Join(args, `","`) + `"]`}, set: single, key: "extraArgs", renders: valid})
	}
	validSets := []string{"kubeAPI.qps=1", "workers=1024", "webhook.lookupTimeout=10s", "shutdownDelay=0s", "shutdownDelay=10s"}
	for _, set := range []string{
		"kubeAPI.qps=0", "kubeAPI.qps=-1", "kubeAPI.qps=1", "kubeAPI.burst=0", "workers=0", "workers=1024", "workers=1025",
		"webhook.lookupTimeout=0s", "webhook.lookupTimeout=10s", "webhook.lookupTimeout=10001ms", "webhook.lookupTimeout=15s", "webhook.lookupTimeout=-1s",
		"shutdownDelay=-1s", "shutdownDelay=0s", "shutdownDelay=10s", "webhook.port=0", "webhook.port=65536",
	} {
		cases = append(cases, contractCase{set: append([]string{set, "webhook.timeoutSeconds=30", "terminationGracePeriodSeconds=60"}, single...),
			key: strings.Split(set, "=")[0], renders: slices.Contains(validSets, set)})
	}
	for _, controllers := range []string{`["*","cloud-node"]`, `["cloud-node","cloud-node"]`, `["bogus"]`, `[]`, `["*"]`, `["cloud-node-lifecycle"]`} {
		cases = append(cases, contractCase{json: []string{"controllers=" + controllers}, set: single, key: "controllers",
			renders: controllers == `[]` || controllers == `["*"]` || controllers == `["cloud-node-lifecycle"]`})
	}
	for _, enabled := range [][]string{
		{"config.clusters[0].enabled=false"},
		{"config.clusters[0].enabled=false", "config.clusters[1].url=https://b.example.com", "config.clusters[1].tokenSecretRef.name=xo", "config.clusters[1].tokenSecretRef.key=b", "config.clusters[1].enabled=false"},
		{"config.clusters[0].enabled=false", "config.clusters[1].url=https://b.example.com", "config.clusters[1].tokenSecretRef.name=xo", "config.clusters[1].tokenSecretRef.key=b"},
		{"config.clusters[0].enabled=true"},
	} {
		cases = append(cases, contractCase{set: append(clusters[:3:3], enabled...), key: "config.clusters", renders: len(enabled) == 4 || enabled[0] == "config.clusters[0].enabled=true"})
	}
	for _, enabled := range []string{"true", "false"} {
		cases = append(cases, contractCase{set: append(single[:2:2], "config.enabled="+enabled), key: "config.enabled", renders: enabled == "true"})
	}
	// No XO server at all: neither config, existingConfigSecret nor XOA_URL.
	cases = append(cases, contractCase{key: "no XO server"},
		contractCase{json: []string{`extraEnv=[{"name":"XOA_URL","value":"https://xo.example.com"},{"name":"XOA_TOKEN","valueFrom":{"secretKeyRef":{"name":"x","key":"y"}}}]`}, renders: true})
	return cases
}

// TestChartRendersOnlyWhatTheBinaryAccepts is the chart's contract with the binary: for every
// render that succeeds, the container's flags pass the binary's flag validation and its config
// (the rendered Secret, the Secrets it names stood in for, the container's environment) loads;
// a combination the binary would refuse fails the render, with a message naming the value.
func TestChartRendersOnlyWhatTheBinaryAccepts(t *testing.T) {
	for _, tc := range contractCases(t) {
		args := rawTemplateArgs(namespace, tc.values, tc.set...)
		for _, j := range tc.json {
			args = append(args, "--set-json", j)
		}
		name := strings.Join(append(append([]string{tc.values}, tc.set...), tc.json...), " ")
		out, err := runHelm(t, args...)
		switch {
		case err != nil && tc.renders:
			t.Errorf("%s: valid values refused: %v", name, err)
			continue
		case err != nil:
			// Refused at render time: the message names the value, as the chart writes it
			// (config.url) or as the schema does ('/config/url').
			if msg := err.Error(); !strings.Contains(msg, tc.key) && !strings.Contains(msg, "'/"+strings.ReplaceAll(tc.key, ".", "/")+"'") {
				t.Errorf("%s: refused without naming %s:\n%s", name, tc.key, msg)
			}
			continue
		}
		objs, err := parseManifests([]byte(out))
		if err != nil {
			t.Fatal(err)
		}
		if err := binaryAccepts(t, objs); err != nil {
			t.Errorf("%s: rendered, but the binary refuses it (its Pods would crash-loop): %v", name, err)
		}
	}
}

// binaryAccepts runs the binary's own validation on a render: its flags, then the config file
// it would read, with the Secrets it mounts stood in for by contractToken and its environment.
func binaryAccepts(t *testing.T, o objects) error {
	_, c := deployment(t, o)
	flagErr := binaryFlags(c.Args)
	p, ok := flagValue(t, c.Args, "config")
	var file string
	if ok {
		m := o.find("Secret", configSecretOf(t, o))
		if m == nil {
			return flagErr // existingConfigSecret: not rendered
		}
		s := decodeManifest[corev1.Secret](t, *m)
		file = standInFiles(t, s.StringData[path.Base(p)])
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = contractToken
		}
	}
	_, cfgErr := config.Load(file, func(k string) string { return env[k] })
	return errors.Join(flagErr, cfgErr)
}

// standInFiles writes the config file under a temporary root, with its absolute paths (the
// mounted Secrets: token files, CA files) moved under that root and each token file holding
// contractToken, and returns the file's path.
func standInFiles(t *testing.T, content string) string {
	root := t.TempDir()
	const mounts = "/etc/xenorchestra-cloud-controller-manager/"
	content = strings.ReplaceAll(content, mounts, root+mounts)
	var cfg struct {
		TokenFile string `json:"tokenFile"`
		Clusters  []struct {
			TokenFile string `json:"tokenFile"`
		} `json:"clusters"`
	}
	_ = yaml.Unmarshal([]byte(content), &cfg) // what does not parse, Load reports
	files := []string{cfg.TokenFile}
	for _, cl := range cfg.Clusters {
		files = append(files, cl.TokenFile)
	}
	for _, f := range files {
		if strings.HasPrefix(f, root) {
			if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, []byte(contractToken), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	file := filepath.Join(root, "config.yaml")
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestRefusalsSayWhatToDo: values a user carries over from the upstream chart or by mistake are
// refused with the chart's message naming the value and the fix, not the schema's "additional
// properties not allowed" or "wrong type".
func TestRefusalsSayWhatToDo(t *testing.T) {
	single := []string{"config.url=https://xo.example.com", "config.token=" + contractToken}
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"config.clusters[0].url=https://a.example.com", "config.clusters[0].token=x"}, "config.clusters[0].token: keep XO tokens out of values: put it in a Secret and set config.clusters[0].tokenSecretRef"},
		{[]string{"config.url=https://xo.example.com", "config.tokenSecretRef.name=s", "config.tokenSecretRef.key=k"}, "config.tokenSecretRef is for config.clusters entries: in the single-server form, put the token in config.token"},
		{append(single, "config.clientTimeout=10s"), "config.clientTimeout is the upstream controller's name for config.requestTimeout: rename it"},
		{append(single, "config.username=admin"), "config.username: the controller authenticates with an XO authentication token, not a user and password: create one"},
		{append(single, "config.password=secret"), "config.password: the controller authenticates with an XO authentication token"},
		{append(single, "image.repository=null"), "image.repository is empty: remove it to use the default"},
		{append(single, "image.repository="), "image.repository is empty"},
	} {
		_, err := runHelm(t, templateArgs(namespace, "", tc.set...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want the message %q", tc.set, err, tc.want)
		}
	}
}
