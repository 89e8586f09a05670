package diagnose

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
)

// Labels the chart (and the plain manifests rendered from it) put on every object.
const (
	labelPartOf   = "app.kubernetes.io/part-of"
	labelInstance = "app.kubernetes.io/instance"
	partOf        = "xenorchestra-cloud-controller-manager"
)

// release is an installation of the controller: its Deployment, the controller's container
// and its flags as the binary parses them, and its Pods.
type release struct {
	Namespace, Name string
	Deployment      *appsv1.Deployment
	Container       *corev1.Container
	// Flags are the container's flags, parsed by the binary's own Options.
	Flags *app.Options
	Pods  []corev1.Pod
}

// findRelease finds the installed release (the Deployment labelled as the chart labels it, in
// --namespace or any namespace, named --release when given) and checks it is available.
func (s *session) findRelease(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	sel := labels.Set{labelPartOf: partOf}
	if s.o.Release != "" {
		sel[labelInstance] = s.o.Release
	}
	ns, where := s.o.Namespace, "namespace "+s.o.Namespace
	list, err := s.cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if ns == "" && apierrors.IsForbidden(err) {
		// Not allowed to list every namespace: the namespace the README installs into.
		ns, where = "kube-system", "namespace kube-system (you may not list Deployments in every namespace)"
		list, err = s.cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	} else if ns == "" {
		where = "any namespace"
	}
	if err != nil {
		s.rep.fail(secRelease, "cannot list the controller's Deployments: "+err.Error(),
			"name the release's namespace with --namespace, with a user allowed to read Deployments there")
		return
	}
	switch len(list.Items) {
	case 0:
		s.rep.fail(secRelease, fmt.Sprintf("no release of the controller in %s (no Deployment labelled %s=%s%s)", where, labelPartOf, partOf, releaseSelector(s.o.Release)),
			"install it (README, \"Install in five lines\"), or name it with --namespace and --release; before installing, run check --pre")
		return
	case 1:
	default:
		var names []string
		for _, d := range list.Items {
			names = append(names, d.Namespace+"/"+d.Labels[labelInstance])
		}
		s.rep.fail(secRelease, "several releases of the controller: "+strings.Join(names, ", "),
			"choose one with --namespace and --release")
		return
	}
	d := &list.Items[0]
	rel := &release{Namespace: d.Namespace, Name: d.Labels[labelInstance], Deployment: d}
	rel.Container = managerContainer(&d.Spec.Template.Spec)
	if rel.Container == nil {
		s.rep.fail(secRelease, fmt.Sprintf("Deployment %s/%s has no container", d.Namespace, d.Name), "reinstall the release")
		return
	}
	flags, err := parseFlags(rel.Container)
	if err != nil {
		s.rep.fail(secRelease, fmt.Sprintf("Deployment %s/%s: the controller's flags do not parse: %v", d.Namespace, d.Name, err),
			"fix extraArgs in the release's values (docs/configuration.md#flags)")
		return
	}
	rel.Flags = flags
	s.rel = rel
	s.rep.ok(secRelease, "release %s in namespace %s: Deployment %s, image %s", rel.Name, rel.Namespace, d.Name, rel.Container.Image)

	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err == nil {
		pods, perr := s.cs.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if perr == nil {
			rel.Pods = pods.Items
		} else {
			err = perr
		}
	}
	if err != nil {
		s.rep.warn(secRelease, "cannot list the release's Pods: "+err.Error(), "run check with a user allowed to list Pods in "+d.Namespace)
	}
	s.checkDeployment(d)
}

// releaseSelector adds the release's name to a message, when one was given.
func releaseSelector(name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprintf(", %s=%s", labelInstance, name)
}

// checkDeployment checks that the Deployment is available, with every replica ready, and warns
// about a single replica.
func (s *session) checkDeployment(d *appsv1.Deployment) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	var available *appsv1.DeploymentCondition
	for i := range st.Conditions {
		if st.Conditions[i].Type == appsv1.DeploymentAvailable {
			available = &st.Conditions[i]
		}
	}
	inspect := fmt.Sprintf("kubectl -n %s get pods -l %s=%s; kubectl -n %s logs deploy/%s", d.Namespace, labelInstance, d.Labels[labelInstance], d.Namespace, d.Name)
	switch {
	case want == 0:
		s.rep.fail(secRelease, fmt.Sprintf("Deployment %s is scaled to 0: no replica runs", d.Name), "scale it up: replicaCount (2 or more)")
		return
	case available == nil || available.Status != corev1.ConditionTrue:
		why := "no Available condition yet"
		if available != nil {
			why = available.Reason + ": " + available.Message
		}
		s.rep.fail(secRelease, fmt.Sprintf("Deployment %s is not available (%d of %d replicas ready; %s)", d.Name, st.ReadyReplicas, want, why),
			"a replica is Ready once XO is listed and its pools settled and the webhook serves (see the sections below): "+inspect+"; docs/troubleshooting.md#pod-does-not-start")
	case st.ReadyReplicas < want:
		s.rep.warn(secRelease, fmt.Sprintf("Deployment %s is available, but only %d of %d replicas are ready", d.Name, st.ReadyReplicas, want), inspect)
	default:
		s.rep.ok(secRelease, "Deployment %s available: %d of %d replicas ready", d.Name, st.ReadyReplicas, want)
	}
	if want == 1 {
		s.rep.warn(secRelease, "a single replica: while it restarts, Nodes are admitted without the webhook's labels and no controller runs",
			"replicaCount: 2 or more")
	}
}

// managerContainer returns the controller's container: the one named manager (the chart's),
// else the only one.
func managerContainer(spec *corev1.PodSpec) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == "manager" {
			return &spec.Containers[i]
		}
	}
	if len(spec.Containers) == 1 {
		return &spec.Containers[0]
	}
	return nil
}

// parseFlags parses the container's flags as the binary does (app.Options and app.Parse).
func parseFlags(c *corev1.Container) (*app.Options, error) {
	args := c.Args
	if len(c.Command) > 1 {
		args = append(append([]string(nil), c.Command[1:]...), args...)
	}
	o := app.NewOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	fs.String("kubeconfig", "", "controller-runtime's flag")
	if err := app.Parse(fs, args); err != nil {
		return nil, err
	}
	return o, nil
}

// gitVersion returns the gitVersion of a /version answer.
func gitVersion(body []byte) string {
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if json.Unmarshal(body, &v) != nil || v.GitVersion == "" {
		return "version unknown"
	}
	return v.GitVersion
}
