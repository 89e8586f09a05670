package bench

import (
	"bytes"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

const sampleBenchOutput = `goos: linux
goarch: amd64
pkg: github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook
cpu: AMD EPYC
BenchmarkAdmissionHandler/vms=1000-2         	   41234	     28001 ns/op	     21000 p50-ns	     90000 p99-ns	   12345 B/op	     150 allocs/op
BenchmarkAdmissionHTTPS
    bench_test.go:10: some log line
BenchmarkAdmissionHTTPS-2   	   10000	    123456 ns/op	      8100 req/s	    700000 p50-ns	   2100000 p99-ns
PASS
ok  	github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook	12.3s
pkg: github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo
BenchmarkDecodeVMs 	     100	  10000000 ns/op
--- FAIL: BenchmarkBroken
ok  	github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo	3.1s
`

func TestParseGoBench(t *testing.T) {
	const webhookPkg = "github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
	tests := []struct {
		name    string
		in      string
		want    []GoBench
		wantErr string
	}{
		{
			name: "go test output of two packages",
			in:   sampleBenchOutput,
			want: []GoBench{
				{Pkg: webhookPkg, Name: "BenchmarkAdmissionHandler/vms=1000", Procs: 2, N: 41234, Metrics: []Metric{
					{28001, "ns/op"}, {21000, "p50-ns"}, {90000, "p99-ns"}, {12345, "B/op"}, {150, "allocs/op"},
				}},
				{Pkg: webhookPkg, Name: "BenchmarkAdmissionHTTPS", Procs: 2, N: 10000, Metrics: []Metric{
					{123456, "ns/op"}, {8100, "req/s"}, {700000, "p50-ns"}, {2100000, "p99-ns"},
				}},
				{Pkg: "github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo", Name: "BenchmarkDecodeVMs", Procs: 1, N: 100, Metrics: []Metric{{1e7, "ns/op"}}},
			},
		},
		{name: "empty", in: "", want: nil},
		{name: "a name with a dash but no procs", in: "BenchmarkA/x-y 5 1 ns/op\n", want: []GoBench{{Name: "BenchmarkA/x-y", Procs: 1, N: 5, Metrics: []Metric{{1, "ns/op"}}}}},
		{name: "a value that is not a number", in: "BenchmarkA-2 5 abc ns/op\n", wantErr: `line 1: value "abc"`},
		{name: "a value without its unit", in: "BenchmarkA-2 5 10 ns/op 3\n", wantErr: "line 1: odd number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseGoBench(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseGoBench(f *testing.F) {
	f.Add(sampleBenchOutput)
	f.Add("BenchmarkA-2 5 1 ns/op 2 B/op\n")
	f.Add("BenchmarkA-x 1\n")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseGoBench(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, b := range got {
			if !strings.HasPrefix(b.Name, "Benchmark") || b.Procs < 1 {
				t.Fatalf("bad result %+v", b)
			}
		}
	})
}

const sampleMetrics = `# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",resource="nodes",subresource="",verb="POST"} 100
apiserver_request_total{code="200",component="apiserver",resource="nodes",subresource="",verb="PATCH"} 40
apiserver_request_total{code="409",component="apiserver",resource="nodes",subresource="",verb="PATCH"} 2
apiserver_request_total{code="200",component="apiserver",resource="nodes",subresource="status",verb="PATCH"} 7
apiserver_request_total{code="200",component="apiserver",resource="nodes",subresource="",verb="LIST"} 3
apiserver_request_total{code="200",component="apiserver",resource="leases",subresource="",verb="PUT"} 9
workqueue_depth{controller="cloud-node",name="cloud-node"} 0
workqueue_depth{controller="lifecycle",name="lifecycle"} 3
weird_label{msg="a \"quoted\", value}\n",other="x"} 1.5 1700000000000
go_goroutines 262
# TYPE req_seconds histogram
req_seconds_bucket{verb="POST",le="0.1"} 3
req_seconds_bucket{verb="POST",le="+Inf"} 4
req_seconds_sum{verb="POST"} 0.5
req_seconds_count{verb="POST"} 4
`

func TestParseMetrics(t *testing.T) {
	s, err := ParseMetrics(strings.NewReader(sampleMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 14 {
		t.Fatalf("%d samples, want 14", len(s))
	}
	if got := Sum(s, "workqueue_depth", nil); got != 3 {
		t.Errorf("workqueue_depth sum %g, want 3", got)
	}
	if got := Sum(s, "workqueue_depth", map[string]string{"name": "cloud-node"}); got != 0 {
		t.Errorf("cloud-node depth %g, want 0", got)
	}
	if got := Sum(s, "go_goroutines", nil); got != 262 {
		t.Errorf("go_goroutines %g, want 262", got)
	}
	if got := Sum(s, "req_seconds_bucket", map[string]string{"le": "0.1"}); got != 3 {
		t.Errorf("req_seconds_bucket{le=0.1} %g, want 3", got)
	}
	if m, n, ok := MeanDelta(nil, s, "req_seconds", map[string]string{"verb": "POST"}); !ok || m != 0.125 || n != 4 {
		t.Errorf("MeanDelta(req_seconds) = %g, %g, %t; want 0.125, 4, true", m, n, ok)
	}
	i := slices.IndexFunc(s, func(x Sample) bool { return x.Name == "weird_label" })
	if i < 0 {
		t.Fatal("no weird_label sample")
	}
	if w := s[i]; w.Labels["msg"] != "a \"quoted\", value}\n" || w.Labels["other"] != "x" || w.Value != 1.5 {
		t.Errorf("escaped label sample parsed as %+v", w)
	}
	got := APIRequests(s, "nodes")
	want := map[string]int64{"POST nodes": 100, "PATCH nodes": 42, "PATCH nodes/status": 7, "LIST nodes": 3}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("APIRequests = %v, want %v", got, want)
	}
	if got := Writes(got); !reflect.DeepEqual(got, map[string]int64{"POST nodes": 100, "PATCH nodes": 42, "PATCH nodes/status": 7}) {
		t.Errorf("Writes = %v", got)
	}
	if got := APIResponses(s, "409"); !reflect.DeepEqual(got, map[string]int64{"PATCH nodes": 2}) {
		t.Errorf("APIResponses(409) = %v, want PATCH nodes 2", got)
	}
	if got := APIResponses(s, "200"); !reflect.DeepEqual(got, map[string]int64{"PATCH nodes": 40, "PATCH nodes/status": 7, "LIST nodes": 3, "PUT leases": 9}) {
		t.Errorf("APIResponses(200) = %v", got)
	}
}

func TestFailedPackages(t *testing.T) {
	got := FailedPackages(sampleBenchOutput + "panic: x\nFAIL\texample.com/a\t5.789s\nFAIL\nok  \texample.com/b\t1s\nFAIL\texample.com/c [build failed]\n")
	if want := []string{"example.com/a", "example.com/c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("FailedPackages = %v, want %v", got, want)
	}
}

func TestHandWritten(t *testing.T) {
	const generated = "# Benchmarks\n\nintro\n\n## Targets\n\n| a |\n\n### Churn run\n\ntext\n\n## Errors during the run\n\n- x\n"
	for _, tt := range []struct{ name, in, want string }{
		{"generated only", generated, ""},
		{"empty", "", ""},
		{"a trailing section", generated + "\n## Cold start\n\n1.2 s\n", "## Cold start\n\n1.2 s\n"},
		{"two trailing sections, the last without a newline", generated + "## Cold start\n\n1.2 s\n\n## More\n\nx", "## Cold start\n\n1.2 s\n\n## More\n\nx\n"},
		{"a level-3 heading and a fenced heading inside it", generated + "## Cold start\n\n### Steps\n\n```\n## Targets\n```\n", "## Cold start\n\n### Steps\n\n```\n## Targets\n```\n"},
		{"a hand-written section followed by a generated one", "## Cold start\n\nx\n\n## Targets\n\ny\n", ""},
	} {
		if got := HandWritten(tt.in); got != tt.want {
			t.Errorf("%s: HandWritten = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestParseMetricsErrors(t *testing.T) {
	for _, in := range []string{
		"novalue\n",
		"m{a=\"b\"} notanumber\n",
		"m{a=\"b} 1\n",
		"m{a=b} 1\n",
		"m 1 2 3\n",
	} {
		if _, err := ParseMetrics(strings.NewReader(in)); err == nil {
			t.Errorf("ParseMetrics(%q) succeeded, want an error", in)
		}
	}
}

func TestMeanDelta(t *testing.T) {
	before := []Sample{
		{Name: "h_sum", Labels: map[string]string{"w": "a"}, Value: 1},
		{Name: "h_count", Labels: map[string]string{"w": "a"}, Value: 10},
		{Name: "h_sum", Labels: map[string]string{"w": "b"}, Value: 100},
		{Name: "h_count", Labels: map[string]string{"w": "b"}, Value: 1},
	}
	after := []Sample{
		{Name: "h_sum", Labels: map[string]string{"w": "a"}, Value: 3},
		{Name: "h_count", Labels: map[string]string{"w": "a"}, Value: 14},
		{Name: "h_sum", Labels: map[string]string{"w": "b"}, Value: 200},
		{Name: "h_count", Labels: map[string]string{"w": "b"}, Value: 2},
	}
	if m, n, ok := MeanDelta(before, after, "h", map[string]string{"w": "a"}); !ok || m != 0.5 || n != 4 {
		t.Errorf("MeanDelta(a) = %g, %g, %t; want 0.5, 4, true", m, n, ok)
	}
	if m, n, ok := MeanDelta(before, after, "h", nil); !ok || m != 102.0/5 || n != 5 {
		t.Errorf("MeanDelta(all) = %g, %g, %t", m, n, ok)
	}
	if _, _, ok := MeanDelta(after, after, "h", nil); ok {
		t.Error("MeanDelta without observations reported a mean")
	}
}

func TestDelta(t *testing.T) {
	got := Delta(map[string]int64{"a": 1, "b": 5}, map[string]int64{"a": 1, "b": 7, "c": 2})
	if want := map[string]int64{"b": 2, "c": 2}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Delta = %v, want %v", got, want)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	tests := []struct {
		d    []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 0.5, 0},
		{ms(7), 0.99, 7 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 0.5, 3 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 1, 5 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 0.01, 1 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.9, 9 * time.Millisecond},
	}
	for _, tt := range tests {
		in := append([]time.Duration(nil), tt.d...)
		if got := Percentile(tt.d, tt.p); got != tt.want {
			t.Errorf("Percentile(%v, %g) = %v, want %v", tt.d, tt.p, got, tt.want)
		}
		if !reflect.DeepEqual(in, tt.d) {
			t.Errorf("Percentile modified its input")
		}
	}
}

func TestSteadyRates(t *testing.T) {
	s := Steady{
		Window: 61 * time.Second, ResyncPeriod: 30 * time.Second, Relists: 2, ListBytes: 4 << 20,
		XORequests: map[string]int64{"GET /rest/v0/vms": 2, "GET /rest/v0/hosts": 2, "GET /rest/v0/pools": 2, "GET /rest/v0/servers": 2},
	}
	if got := s.RequestsPerRelist(); got != 4 {
		t.Errorf("per relist %g, want 4", got)
	}
	if got := s.RequestsPerMinuteAt(10 * time.Minute); got != 0.4 {
		t.Errorf("per minute at 10m %g, want 0.4", got)
	}
	if got := s.RequestsPerMinute(); math.Abs(got-8*60/61.0) > 1e-9 {
		t.Errorf("per minute %g", got)
	}
	if got := s.BytesPerRelist(); got != 2<<20 {
		t.Errorf("bytes per relist %g", got)
	}
	if (Steady{}).RequestsPerRelist() != 0 || (Steady{}).RequestsPerMinute() != 0 {
		t.Error("an empty window has a rate")
	}
	u := Upstream{Requests: 3000, Period: 5 * time.Minute}
	if got := u.RequestsPerMinute(); got != 600 {
		t.Errorf("upstream per minute %g, want 600", got)
	}
}

func TestRSSGrowth(t *testing.T) {
	var c Churn
	for i := range 10 {
		// Flat at 50 MiB for the first half, then growing 2 MiB per minute.
		rss := int64(50 << 20)
		if i >= 5 {
			rss += int64(i-5) * (2 << 20)
		}
		c.Samples = append(c.Samples, MemSample{At: time.Duration(i) * time.Minute, RSS: rss})
	}
	delta, slope := c.RSSGrowth()
	if delta != 8<<20 {
		t.Errorf("delta %d, want %d", delta, 8<<20)
	}
	if math.Abs(slope-float64(2<<20)) > 1 {
		t.Errorf("slope %g bytes/min, want %d", slope, 2<<20)
	}
	if d, s := (Churn{}).RSSGrowth(); d != 0 || s != 0 {
		t.Error("growth without samples")
	}
}

func TestBounded(t *testing.T) {
	mk := func(rss []int64, g0, g1 int) Churn {
		var c Churn
		for i, r := range rss {
			g := g0
			if i == len(rss)-1 {
				g = g1
			}
			c.Samples = append(c.Samples, MemSample{At: time.Duration(i) * time.Minute, RSS: r << 20, Goroutines: g})
		}
		return c
	}
	tests := []struct {
		name string
		c    Churn
		want bool
	}{
		{"flat", mk([]int64{100, 120, 110, 118, 112, 119}, 260, 262), true},
		{"warm-up then plateau", mk([]int64{60, 150, 170, 160, 175, 170}, 260, 260), true},
		{"steady growth", mk([]int64{100, 110, 120, 130, 140, 150, 160, 170}, 260, 260), false},
		{"goroutine leak", mk([]int64{100, 100, 100, 100}, 260, 400), false},
		{"too few samples to tell", mk([]int64{100, 100}, 1, 1), false},
	}
	for _, tt := range tests {
		if got := tt.c.Bounded(); got != tt.want {
			t.Errorf("%s: Bounded() = %t, want %t", tt.name, got, tt.want)
		}
	}
}

func TestMedianMemory(t *testing.T) {
	got := MedianMemory([]Memory{
		{RSS: 30, HeapInuse: 3, HWM: 40, Goroutines: 1},
		{RSS: 10, HeapInuse: 1, HWM: 40, Goroutines: 2},
		{RSS: 20, HeapInuse: 5, HWM: 50, Goroutines: 3},
	})
	want := Memory{RSS: 20, RSSMax: 30, Readings: 3, HeapInuse: 3, HWM: 50, Goroutines: 3}
	if got != want {
		t.Fatalf("MedianMemory = %+v, want %+v", got, want)
	}
}

func TestProcSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc here: " + err.Error())
	}
	st, err := ReadProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || st.PPID != os.Getppid() {
		t.Errorf("ReadProcStat(self) = %+v; want pid %d ppid %d", st, os.Getpid(), os.Getppid())
	}
	// Burn 200 ms of CPU, then compare with getrusage (the same kernel counters, in clock
	// ticks in /proc).
	var ru syscall.Rusage
	used := func() time.Duration {
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for used() < 200*time.Millisecond {
	}
	if st, err = ReadProcStat(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if u := used(); st.CPU < u-50*time.Millisecond || st.CPU > u+50*time.Millisecond {
		t.Errorf("ReadProcStat(self).CPU = %s, getrusage says %s", st.CPU, u)
	}
	self, err := ProcMemory(os.Getpid())
	if err != nil || self.RSS <= 0 || self.HWM < self.RSS || self.File <= 0 || self.File > self.RSS {
		t.Errorf("ProcMemory(self) = %+v, %v", self, err)
	}
	kids, err := Children(os.Getppid())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sts := range kids {
		for _, s := range sts {
			found = found || s.PID == os.Getpid()
		}
	}
	if !found {
		t.Errorf("Children(parent) does not list this process: %v", kids)
	}
	if _, err := LoadAvg(); err != nil {
		t.Error(err)
	}
}

func TestRender(t *testing.T) {
	r := &Results{
		Command: "make bench", Started: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), Creators: 64,
		Machine: Machine{CPUs: 2, CPUModel: "Test CPU", GoVersion: "go1.26", LoadStart: [3]float64{0.5, 0.4, 0.3}},
		Pools:   4, Hosts: 32, VMs: 10000,
		Bursts: []Burst{
			{Nodes: 500, Webhook: true, Initialized: 500, Total: 3200 * time.Millisecond, P50: time.Second, P99: 3 * time.Second, Max: 3100 * time.Millisecond,
				APIRequests: map[string]int64{"POST nodes": 500, "PATCH nodes": 500, "LIST nodes": 1}},
			{Nodes: 5000, Webhook: false, Initialized: 5000, Total: 41 * time.Second, CPU: map[string]time.Duration{"kube-apiserver": 50 * time.Second},
				APIRequests: map[string]int64{"POST nodes": 5000, "PATCH nodes": 5000, "PATCH nodes/status": 5000, "POST events": 100}},
			{Nodes: 5000, Webhook: true, Initialized: 4000, Total: 300 * time.Second, BornComplete: 3990, CPU: map[string]time.Duration{"kube-apiserver": 40 * time.Second},
				APIRequests: map[string]int64{"POST nodes": 5000, "PATCH nodes": 10, "POST events": 100}},
		},
		Steady: []Steady{
			{Nodes: 100, Window: time.Minute, ResyncPeriod: 30 * time.Second, Relists: 2, ListBytes: 2 << 20,
				XORequests: map[string]int64{"GET /rest/v0/vms": 2, "GET /rest/v0/hosts": 2, "GET /rest/v0/pools": 2, "GET /rest/v0/servers": 2}},
			{Nodes: 5000, Window: time.Minute, ResyncPeriod: 30 * time.Second, Relists: 2, ListBytes: 2 << 20, NodeChanges: 1,
				XORequests: map[string]int64{"GET /rest/v0/vms": 2, "GET /rest/v0/hosts": 2, "GET /rest/v0/pools": 2, "GET /rest/v0/servers": 2}},
		},
		Upstream: []Upstream{{Nodes: 5000, Requests: 30000, Bytes: 30 << 20, Period: 5 * time.Minute}},
		Reactions: []Reaction{
			{Kind: ReactionMigrated, Mode: ModeEvents, Nodes: 5000, Samples: []time.Duration{10 * time.Millisecond, 30 * time.Millisecond, 20 * time.Millisecond}},
			{Kind: ReactionDeleted, Mode: ModeEvents, Nodes: 5000, Settle: 30 * time.Second, Samples: []time.Duration{30*time.Second + 10*time.Millisecond, 30*time.Second + 40*time.Millisecond}},
			{Kind: ReactionDeleted, Mode: ModeRelist, Nodes: 5000, Settle: 30 * time.Second, Samples: []time.Duration{29 * time.Second, 33 * time.Second}},
		},
		SettleTime: 30 * time.Second,
		Estates: &Estates{
			Servers: 2, VMsPerServer: 5000, PoolsPerServer: 2, HostsPerPool: 4,
			Split: &Burst{Nodes: 1000, Webhook: true, Initialized: 1000, Total: 5 * time.Second, Conflicts: map[string]int64{"PATCH nodes": 3}},
			SplitLoad: []Steady{
				{Server: "xo-a", Nodes: 1000, Window: 31 * time.Second, ResyncPeriod: 30 * time.Second, Relists: 1, XORequests: map[string]int64{"GET /rest/v0/vms": 1, "GET /rest/v0/hosts": 1, "GET /rest/v0/pools": 1, "GET /rest/v0/servers": 1}},
				{Server: "xo-a", Nodes: 100, Window: 31 * time.Second, ResyncPeriod: 30 * time.Second, Relists: 1, XORequests: map[string]int64{"GET /rest/v0/vms": 1, "GET /rest/v0/hosts": 1, "GET /rest/v0/pools": 1, "GET /rest/v0/servers": 1}},
			},
			Outage: &Outage{Burst: Burst{Nodes: 500, Webhook: true, Initialized: 500, Total: 4500 * time.Millisecond}, DownNodes: 20, DroppedNodes: 20, Deleted: []string{"b-node-00001"}, Watched: 45 * time.Second},
			Scope: []ScopeRun{
				{ScopePools: 2, Pools: 20, VMs: 10000, ScopeVMs: 1000, Nodes: 1000, HeldVMs: 1000, Memory: Memory{RSS: 40 << 20},
					Load: Steady{Window: 31 * time.Second, ResyncPeriod: 30 * time.Second, Relists: 1, ListBytes: 1 << 20}},
				{Pools: 20, VMs: 10000, ScopeVMs: 10000, Nodes: 1000, HeldVMs: 10000, Memory: Memory{RSS: 60 << 20},
					Load: Steady{Window: 31 * time.Second, ResyncPeriod: 30 * time.Second, Relists: 1, ListBytes: 4 << 20}},
			},
		},
		Large: &Large{Pools: 20, HostsPerPool: 10, VMs: 100000, Runs: []LargeRun{
			{ScopePools: 2, ScopeVMs: 10000, HeldVMs: 10000, Nodes: 1000, Memory: Memory{RSS: 66 << 20},
				Burst:  Burst{Nodes: 500, Webhook: true, Initialized: 500, Total: 3 * time.Second, AdmissionMean: 20 * time.Millisecond, AdmissionP99: 90 * time.Millisecond},
				Events: 5000, SimTook: time.Second, Applied: 5000, AppliedAfter: 2 * time.Second, RelistMean: 300 * time.Millisecond,
				Load: Steady{Window: 35 * time.Second, ResyncPeriod: 30 * time.Second, Relists: 1, ListBytes: 4 << 20}},
			{ScopeVMs: 100000, HeldVMs: 100000, Nodes: 1000, Memory: Memory{RSS: 156 << 20},
				Burst: Burst{Nodes: 500, Webhook: true, Initialized: 500, Total: 5 * time.Second}},
		}},
		Memory: []Memory{{Nodes: 1000, VMs: 10000, RSS: 62 << 20}, {Nodes: 5000, VMs: 10000, RSS: 90 << 20, HWM: 120 << 20}},
		Errors: []string{"something failed"},
	}
	micro := []GoBench{{Pkg: "github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook", Name: "BenchmarkAdmissionHandler/vms=1000", Procs: 2, N: 10,
		Metrics: []Metric{{28000, "ns/op"}, {21000, "p50-ns"}, {90000, "p99-ns"}, {100, "allocs/op"}, {5000, "B/op"}}}}
	var buf bytes.Buffer
	if err := Render(&buf, r, micro); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"| machine | 2 CPUs, Test CPU |",
		"| 500 Nodes at once (webhook on) all initialized within 4 s | 3.20 s | met |",
		"| 5,000 Nodes at once (webhook off) all initialized within 30 s | 41.00 s | **missed** |",
		"| 5,000 Nodes at once (webhook on) all initialized within 30 s | only 4000 of 5000 initialized | **missed** |",
		"| resident memory with 5,000 Nodes and 10,000 VMs ≤ 80 MiB | 90.0 MiB | **missed** |",
		"| API server writes per resync when nothing changed: zero | 1 Node changes and write requests over 4 relists | **missed** |",
		"| XO requests flat in the number of Nodes | 4 to 4 requests per relist for 100 to 5,000 Nodes | met |",
		"| 500 | on | 3.20 s | 0 | 1.00 s | 3.00 s | 3.10 s |",
		"| 500 (1.00 per Node) |",
		"| 5,000 Nodes, webhook on no slower than off, in the same run | on 5m0s, off 41.00 s | **missed** |",
		"| 5,000 Nodes, webhook on: Node writes by the controller ≤ 0.05 per Node, every Node born complete (no uninitialized taint in its CREATE answer) | 0.002 per Node, 3990 of 5000 born complete | **missed** |",
		"| 5,000 | off | 41.00 s | 0 | 10000 (2.00 per Node) | 100 | 10 ms |",
		"| 5,000 | on | only 4000 of 5000 initialized | 3990 | 10 (0.00 per Node) | 100 | 8 ms |",
		"| 5,000 | 30,000 | 6,000 | ",
		"| 0.40 | 102.4 KiB | 15,000× |",
		"| 15,000× |",
		"| VM migrated → zone label | event stream | 5,000 | 3 | 10 ms | 20 ms | 30 ms | — | 199 s |",
		"| AdmissionHandler/vms=1000 | 21.0 µs | 90.0 µs |",
		"- something failed",
		"| API server's 409 Conflict answers during the bursts: zero | 3 over 7 bursts | **missed** |",
		"| VM deleted (Node NotReady) → Node deleted once `inventory.settleTime` (30 s) has passed, a wait by design, and within 2 s beyond it with the event stream | settle time + 10 ms p50, + 40 ms slowest of 2 | met |",
		"| VM deleted (Node NotReady) → Node deleted | relist only | 5,000 | 2 | 29.00 s | 29.00 s | 33.00 s | − 1.00 s / + 3.00 s (settle time 30 s) |",
		"| XO requests per relist of each XO server flat in the number of Nodes, with 2 servers | 4 to 4 requests per relist per server for 100 to 1,000 Nodes | met |",
		"| 500 Nodes of one XO server at once while the other server is down: all initialized within 4 s | 4.50 s | **missed** |",
		"| NotReady Nodes deleted while their XO server is down or XO drops their pool: zero | 1 of 40 (20 of the down server, 20 of the dropped pool), watched 45 s after the drop | **missed** |",
		"| a pool scope of 2 pools out of 20: only the VMs in scope held in memory | 1,000 VMs held, 1,000 in scope, 10,000 in XO | met |",
		"| 2 servers | 1,000 | 5.00 s |",
		"| `inventory.settleTime` | 30 s in every run",
		"With the scope: 25% of the relist bytes and 20.0 MiB less resident memory (median) than without.",
		"| 2 pools of 20 (1,000 VMs) | 1,000 | 1 | 0 | 1.00 MiB | 40.0 MiB |",
		"| resident memory of a 100,000-VM XO scoped to the Nodes' pools (10,000 VMs) within 10% of the 10,000-VM figure, 1,000 Nodes | 66.0 MiB vs 62.0 MiB (+6%) | met |",
		"| 2 pools (10,000 VMs) | 10,000 | 300 ms | 4.00 MiB | 0 | 3.00 s | 20 ms / 90 ms | 5,000 in 1.00 s (5,000/s) / 5,000 in 2.00 s (2,500/s) | 66.0 MiB |",
		"Without a scope the inventory holds 90,000 more VMs for 90.0 MiB more resident memory: 1049 bytes per VM.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for line := range strings.Lines(out) {
		if h, ok := strings.CutPrefix(line, "## "); ok && !slices.Contains(Sections, strings.TrimSpace(h)) {
			t.Errorf("heading %q is not in Sections: HandWritten would keep it", h)
		}
	}
	if HandWritten(out) != "" {
		t.Errorf("HandWritten finds a hand-written part in a generated report")
	}
	if t.Failed() {
		t.Log(out)
	}
}

func TestFormat(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{count(0), "0"}, {count(999), "999"}, {count(1000), "1,000"}, {count(-1234567), "-1,234,567"},
		{dur(0), "0"}, {dur(500 * time.Nanosecond), "500 ns"}, {dur(1500 * time.Nanosecond), "1.5 µs"},
		{dur(12 * time.Millisecond), "12 ms"}, {dur(30 * time.Second), "30.00 s"}, {dur(1500 * time.Millisecond), "1.50 s"},
		{dur(10 * time.Minute), "10m0s"}, {dur(150*time.Second + 300*time.Millisecond), "2m30s"},
		{period(30 * time.Second), "30 s"}, {period(10 * time.Minute), "10 min"}, {period(61 * time.Second), "61 s"}, {period(1500 * time.Millisecond), "1.50 s"},
		{num(0.4), "0.40"}, {num(7.66), "7.7"}, {num(1234.4), "1,234"}, {num(math.Inf(1)), "—"},
		{kib(0), "0"}, {kib(2048), "2.0 KiB"}, {kib(3 << 20), "3.00 MiB"}, {mib(0), "—"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
