package common

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func nodeAt(rv string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: rv}}
}

func TestOwnWrites(t *testing.T) {
	var w OwnWrites
	if w.Behind(nodeAt("1")) {
		t.Fatal("behind with no write")
	}
	w.wrote("n", "1", "1") // a write that changed nothing
	if w.Behind(nodeAt("1")) {
		t.Fatal("a no-op write made the cache behind: the Node would wait forever")
	}
	w.wrote("n", "1", "2") // status
	w.wrote("n", "2", "3") // then spec, in the same reconcile
	for _, rv := range []string{"1", "2"} {
		if !w.Behind(nodeAt(rv)) {
			t.Errorf("cache at %s, replaced by our writes: not behind", rv)
		}
	}
	if w.Behind(nodeAt("3")) {
		t.Error("cache at our last write: behind")
	}
	// Caught up: the record is gone, a later read of an old version is not ours to judge.
	if w.Behind(nodeAt("1")) {
		t.Error("record kept after the cache caught up")
	}
	w.wrote("n", "4", "5")
	w.Forget("n")
	if w.Behind(nodeAt("4")) {
		t.Error("behind after Forget")
	}
}

// TestOwnWritesOnTopOfAnotherWrite: a write without a resourceVersion lock may land on a
// version another writer made after our read; until the cache shows our write, that version
// too is behind, although we never read it.
func TestOwnWritesOnTopOfAnotherWrite(t *testing.T) {
	var w OwnWrites
	w.wrote("n", "10", "12") // read 10; someone wrote 11; ours applied on top of it
	for _, rv := range []string{"10", "11"} {
		if !w.Behind(nodeAt(rv)) {
			t.Errorf("cache at %s, older than our write: not behind", rv)
		}
	}
	if w.Behind(nodeAt("13")) {
		t.Error("cache past our write: behind")
	}
	// Versions that do not compare as integers: the versions our writes replaced are behind.
	w.wrote("n", "a", "c")
	if !w.Behind(nodeAt("a")) {
		t.Error("cache at the version our write replaced: not behind")
	}
	if w.Behind(nodeAt("b")) {
		t.Error("cache at a version that is not ours to judge: behind")
	}
}
