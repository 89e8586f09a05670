package testenv

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestRestartAPIServer: with APIServerCertDir, kube-apiserver stops and comes back on the same
// port with the same certificates, so the client made before the restart still works, and
// what etcd holds is still there.
func TestRestartAPIServer(t *testing.T) {
	if _, err := AssetsDir(); err != nil {
		t.Skip(err)
	}
	env := StartTest(t, Options{APIServerCertDir: t.TempDir()})
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "before-restart"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if stopErr, err := env.RestartAPIServer(100 * time.Millisecond); err != nil || stopErr != nil {
		t.Fatalf("restart: %v (stop: %v)", err, stopErr)
	}
	var got corev1.Namespace
	if err := env.Client.Get(ctx, types.NamespacedName{Name: ns.Name}, &got); err != nil {
		t.Fatalf("the client made before the restart: %v", err)
	}
	if got.UID != ns.UID {
		t.Errorf("namespace UID %s after the restart, want %s", got.UID, ns.UID)
	}

	plain := StartTest(t, Options{})
	if _, err := plain.RestartAPIServer(0); err == nil {
		t.Error("RestartAPIServer without APIServerCertDir: no error")
	}
}
