package e2e_test

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

// TestFindToken checks the leak scanner itself: a scan that cannot find the token proves
// nothing.
func TestFindToken(t *testing.T) {
	const token = "e2eTok0123456789abcdef0123456789abcdef0123456789abcdef"
	half := len(token) / 2
	for _, tc := range []struct {
		name string
		data string
		want bool
	}{
		{"absent", `{"msg":"XO relist failed","error":"xo list vms: HTTP 401: invalid credentials"}`, false},
		{"whole", `cookie authenticationToken=` + token + `; Path=/`, true},
		{"first half, rest masked", "token " + token[:half] + "****", true},
		{"second half", "..." + token[half:], true},
		{"base64", "Basic " + base64.StdEncoding.EncodeToString([]byte(token)), true},
		{"a short prefix is no leak", "token " + token[:8] + "…", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(findToken(token, []byte(tc.data))) > 0; got != tc.want {
				t.Errorf("findToken(%q) found: %v, want %v", tc.data, got, tc.want)
			}
		})
	}
}

// TestHexDumps checks that a token split across the lines of a client-go body dump (as the
// log writes it, with escaped newlines) is found once the dump is decoded.
func TestHexDumps(t *testing.T) {
	const token = "e2eTokfedcba9876543210fedcba9876543210fedcba98765432"
	body := []byte(`{"message":"cookie authenticationToken=` + token + `"}`)
	var dump strings.Builder
	for off := 0; off < len(body); off += 16 {
		line := body[off:min(off+16, len(body))]
		fmt.Fprintf(&dump, "%08x ", off)
		for i, b := range line {
			if i == 8 {
				dump.WriteString(" ")
			}
			fmt.Fprintf(&dump, " %02x", b)
		}
		dump.WriteString(`  |` + strings.Repeat(".", len(line)) + `|\n`)
	}
	log := `2026-01-01T00:00:00Z	LEVEL(-8)	client	Request Body	{"body": "` + dump.String() + `"}` + "\n"
	if len(findToken(token, []byte(log))) != 0 {
		t.Fatal("the token is readable in the raw dump: the test dump is not split")
	}
	if got := hexDumps([]byte(log)); len(findToken(token, got)) == 0 {
		t.Errorf("token not found in the decoded dump %q", got)
	}
	if got := hexDumps([]byte("no dump, only a uuid 7e57f00d-0000-4000-8000-000000000001")); len(got) != 0 {
		t.Errorf("hexDumps of a line without a dump = %s", hex.EncodeToString(got))
	}
}

// TestMetricSum checks the Prometheus text parser the leader-election test counts with.
func TestMetricSum(t *testing.T) {
	text := []byte(`# HELP controller_runtime_reconcile_total Total number of reconciliations per controller
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="cloud-node",result="success"} 7
controller_runtime_reconcile_total{controller="cloud-node",result="error"} 2
controller_runtime_reconcile_total{controller="cloud-node-lifecycle",result="success"} 5
controller_runtime_reconcile_errors_total{controller="cloud-node"} 2
leader_election_master_status{name="xenorchestra-cloud-controller-manager"} 1
plain_metric 3.5
`)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"controller_runtime_reconcile_total", []string{`controller="cloud-node"`}, 9},
		{"controller_runtime_reconcile_total", []string{`controller="cloud-node-lifecycle"`}, 5},
		{"controller_runtime_reconcile_total", []string{`controller="cloud-node-label-sync"`}, 0},
		{"controller_runtime_reconcile_total", nil, 14},
		{"leader_election_master_status", []string{`name="xenorchestra-cloud-controller-manager"`}, 1},
		{"plain_metric", nil, 3.5},
		{"plain", nil, 0},
	} {
		if got := metricSum(text, tc.name, tc.labels...); got != tc.want {
			t.Errorf("metricSum(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}
