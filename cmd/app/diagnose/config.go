package diagnose

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
)

// loadConfig loads the controller's XO config: --config (and the XOA_* environment, as the
// binary reads them), else the release's, read from the Secrets and ConfigMaps its Pod mounts
// with the user's own permissions.
func (s *session) loadConfig(ctx context.Context) {
	var (
		cfg    *config.Config
		err    error
		source string
	)
	switch {
	case s.o.ConfigFile != "":
		source = "config file " + s.o.ConfigFile
		cfg, err = config.Load(s.o.ConfigFile, s.o.Env)
	case s.rel != nil:
		cfg, source, err = s.releaseConfig(ctx)
		if errors.Is(err, errNotAllowed) {
			s.rep.warn(secConfig, fmt.Sprintf("cannot read the controller's config (%s): %v", source, err),
				"pass the controller's config file with --config, or run check as a user allowed to get Secrets in "+s.rel.Namespace+": the XO checks are skipped")
			return
		}
	case s.o.Env(config.EnvURL) != "":
		source = "the environment (" + config.EnvURL + ")"
		cfg, err = config.Load("", s.o.Env)
	default:
		s.rep.warn(secConfig, "no XO config: the XO servers and the Nodes' VMs are not checked",
			"pass the controller's config file with --config")
		return
	}
	if err != nil {
		// config's errors list every problem and never hold a token.
		s.rep.fail(secConfig, err.Error(), "fix the config: docs/configuration.md#config-file")
		return
	}
	for _, cl := range cfg.Clusters {
		s.rep.hide(cl.Token.Reveal())
	}
	s.cfg = cfg
	s.rep.ok(secConfig, "%s: %d XO server(s) (%s)", source, len(cfg.Clusters), serverList(cfg))
	for _, w := range cfg.Warnings() {
		s.rep.warn(secConfig, w, "")
	}
}

// serverList names the config's XO servers with their URLs.
func serverList(cfg *config.Config) string {
	var parts []string
	for _, c := range cfg.Clusters {
		p := c.Name + " " + c.URL
		if !c.IsEnabled() {
			p += " (disabled)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// errNotAllowed marks a read the user's permissions refuse.
var errNotAllowed = errors.New("not allowed with your permissions")

// releaseConfig loads the config the release's controller reads: the file of its --config and
// the XOA_* variables of its environment, each file read from the Secret or ConfigMap mounted
// where it is. CA files become inline bundles, for the TLS settings of this process.
func (s *session) releaseConfig(ctx context.Context) (*config.Config, string, error) {
	p := &podFiles{ctx: ctx, s: s, ns: s.rel.Namespace, spec: &s.rel.Deployment.Spec.Template.Spec, c: s.rel.Container}
	file := s.rel.Flags.ConfigFile
	source := "the release's environment"
	if file != "" {
		source = "the release's --config " + file
		if v := p.volumeOf(file); v != nil && v.Secret != nil {
			source += " (Secret " + s.rel.Namespace + "/" + v.Secret.SecretName + ")"
		}
	}
	env, err := p.env()
	if err != nil {
		return nil, source, err
	}
	cfg, err := config.LoadFiles(file, env, p.read)
	if p.denied != nil {
		return nil, source, p.denied
	}
	if err != nil {
		return nil, source, err
	}
	for i := range cfg.Clusters {
		cl := &cfg.Clusters[i]
		if cl.CAFile == "" {
			continue
		}
		b, err := p.read(cl.CAFile)
		if err != nil {
			return nil, source, fmt.Errorf("XO server %s: caFile: %w", cl.Name, err)
		}
		cl.CABundle, cl.CAFile = string(b), ""
	}
	return cfg, source, nil
}

// podFiles reads the files and environment of the controller's container from the objects its
// Pod template mounts, with the user's permissions.
type podFiles struct {
	ctx  context.Context
	s    *session
	ns   string
	spec *corev1.PodSpec
	c    *corev1.Container
	// denied is the first read the user's permissions refused.
	denied  error
	secrets map[string]map[string][]byte
}

// volumeOf returns the volume mounted at the deepest mount point holding file, nil when none.
func (p *podFiles) volumeOf(file string) *corev1.Volume {
	m := p.mountOf(file)
	if m == nil {
		return nil
	}
	for i := range p.spec.Volumes {
		if p.spec.Volumes[i].Name == m.Name {
			return &p.spec.Volumes[i]
		}
	}
	return nil
}

// mountOf returns the container's deepest mount holding file.
func (p *podFiles) mountOf(file string) *corev1.VolumeMount {
	// A Linux path, whatever the separator of the machine the command runs on (config.LoadFiles
	// resolves relative paths with it).
	file = filepath.ToSlash(file)
	var best *corev1.VolumeMount
	for i := range p.c.VolumeMounts {
		m := &p.c.VolumeMounts[i]
		dir := strings.TrimSuffix(m.MountPath, "/")
		if (file == dir || strings.HasPrefix(file, dir+"/")) && (best == nil || len(dir) > len(best.MountPath)) {
			best = m
		}
	}
	return best
}

// read returns the content of a file of the container. Its errors never hold the file's path
// (config.LoadFiles's rule).
func (p *podFiles) read(file string) ([]byte, error) {
	m, v := p.mountOf(file), p.volumeOf(file)
	if m == nil || v == nil {
		return nil, errors.New("no volume of the controller's container is mounted there")
	}
	file = filepath.ToSlash(file)
	rel := strings.TrimPrefix(strings.TrimPrefix(file, strings.TrimSuffix(m.MountPath, "/")), "/")
	if m.SubPath != "" {
		rel = path.Join(m.SubPath, rel)
	}
	var (
		data  map[string][]byte
		items []corev1.KeyToPath
		what  string
		err   error
	)
	switch {
	case v.Secret != nil:
		what, items = "Secret "+p.ns+"/"+v.Secret.SecretName, v.Secret.Items
		data, err = p.secret(v.Secret.SecretName)
	case v.ConfigMap != nil:
		what, items = "ConfigMap "+p.ns+"/"+v.ConfigMap.Name, v.ConfigMap.Items
		data, err = p.configMap(v.ConfigMap.Name)
	default:
		return nil, fmt.Errorf("volume %s is neither a Secret nor a ConfigMap, which this command cannot read: pass --config", v.Name)
	}
	if err != nil {
		return nil, err
	}
	key := rel
	for _, it := range items {
		if it.Path == rel {
			key = it.Key
		}
	}
	b, ok := data[key]
	if !ok {
		return nil, fmt.Errorf("%s (mounted at %s) has no such key", what, m.MountPath)
	}
	return b, nil
}

// env returns the container's XOA_* environment variables (from values, Secrets and
// ConfigMaps), as the binary would read them.
func (p *podFiles) env() (func(string) string, error) {
	vals := map[string]string{}
	for _, from := range p.c.EnvFrom {
		var data map[string][]byte
		var err error
		switch {
		case from.SecretRef != nil:
			data, err = p.secret(from.SecretRef.Name)
		case from.ConfigMapRef != nil:
			data, err = p.configMap(from.ConfigMapRef.Name)
		}
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			vals[from.Prefix+k] = string(v)
		}
	}
	for _, e := range p.c.Env {
		if !strings.HasPrefix(e.Name, "XOA_") {
			continue
		}
		var (
			data map[string][]byte
			key  string
			err  error
		)
		switch {
		case e.ValueFrom == nil:
			vals[e.Name] = e.Value
			continue
		case e.ValueFrom.SecretKeyRef != nil:
			key = e.ValueFrom.SecretKeyRef.Key
			data, err = p.secret(e.ValueFrom.SecretKeyRef.Name)
		case e.ValueFrom.ConfigMapKeyRef != nil:
			key = e.ValueFrom.ConfigMapKeyRef.Key
			data, err = p.configMap(e.ValueFrom.ConfigMapKeyRef.Name)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("environment variable %s: %w", e.Name, err)
		}
		vals[e.Name] = string(data[key])
	}
	return func(k string) string { return vals[k] }, nil
}

// secret returns the data of a Secret of the release's namespace.
func (p *podFiles) secret(name string) (map[string][]byte, error) {
	if d, ok := p.secrets[name]; ok {
		return d, nil
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.s.o.Timeout)
	defer cancel()
	sec, err := p.s.cs.CoreV1().Secrets(p.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, p.readError("Secret", name, err)
	}
	if p.secrets == nil {
		p.secrets = map[string]map[string][]byte{}
	}
	p.secrets[name] = sec.Data
	return sec.Data, nil
}

// configMap returns the data of a ConfigMap of the release's namespace, text and binary.
func (p *podFiles) configMap(name string) (map[string][]byte, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.s.o.Timeout)
	defer cancel()
	cm, err := p.s.cs.CoreV1().ConfigMaps(p.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, p.readError("ConfigMap", name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return data, nil
}

// readError records a read the user may not make (denied) and words the error.
func (p *podFiles) readError(kind, name string, err error) error {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		err = fmt.Errorf("get %s %s/%s: %w", kind, p.ns, name, errNotAllowed)
		if p.denied == nil {
			p.denied = err
		}
		return err
	}
	return fmt.Errorf("get %s %s/%s: %w", kind, p.ns, name, err)
}
