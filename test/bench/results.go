package bench

import (
	"math"
	"slices"
	"time"
)

// Results are the figures of one end-to-end benchmark run, as written to JSON by the bench-tagged
// test and read by the render command.
type Results struct {
	// Quick is set for a shortened run (make bench QUICK=1).
	Quick bool `json:"quick"`
	// Command reproduces the run.
	Command  string    `json:"command"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Machine  Machine   `json:"machine"`
	// Pools, Hosts and VMs describe the simulated XO inventory.
	Pools int `json:"pools"`
	Hosts int `json:"hosts"`
	VMs   int `json:"vms"`
	// Creators is the number of goroutines creating Nodes at once in a burst.
	Creators  int        `json:"creators"`
	Bursts    []Burst    `json:"bursts"`
	Steady    []Steady   `json:"steady"`
	Upstream  []Upstream `json:"upstream"`
	Reactions []Reaction `json:"reactions"`
	Memory    []Memory   `json:"memory"`
	Churn     *Churn     `json:"churn,omitempty"`
	// Estates are the runs with several XO servers and with a pool scope.
	Estates *Estates `json:"estates,omitempty"`
	Large   *Large   `json:"large,omitempty"`
	// SettleTime is the controller's inventory.settleTime in every run of the controller.
	SettleTime time.Duration `json:"settleTime"`
	// Notes explain how a figure was obtained.
	Notes []string `json:"notes,omitempty"`
	// Errors are checks that failed during the run (a Node never initialized, ...).
	Errors []string `json:"errors,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel"`
	GoVersion string `json:"goVersion"`
	OS        string `json:"os"`
	Kernel    string `json:"kernel"`
	// LoadStart and LoadEnd are the 1-, 5- and 15-minute load averages at the start and end.
	LoadStart [3]float64 `json:"loadStart"`
	LoadEnd   [3]float64 `json:"loadEnd"`
}

// Burst is one initialization burst: Nodes created at once, as kubelets with
// --cloud-provider=external create them.
type Burst struct {
	Nodes    int  `json:"nodes"`
	Webhook  bool `json:"webhook"`
	Creators int  `json:"creators"`
	// Total runs from the first CREATE sent to the last Node seen initialized.
	Total time.Duration `json:"total"`
	// Latencies are, per Node, the time from its CREATE sent to it seen initialized (the
	// uninitialized taint gone, providerID and labels set) through a watch.
	Latencies []time.Duration `json:"-"`
	P50       time.Duration   `json:"p50"`
	P99       time.Duration   `json:"p99"`
	Max       time.Duration   `json:"max"`
	// CreatesDone runs from the first CREATE sent to the last CREATE answered: how long the
	// API server took to accept the burst, a floor for Total.
	CreatesDone time.Duration `json:"createsDone"`
	// CreateP50 and CreateP99 are the CREATE round trips (admission included).
	CreateP50 time.Duration `json:"createP50"`
	CreateP99 time.Duration `json:"createP99"`
	// LabelledAtCreate counts the Nodes whose CREATE answer already carried the providerID
	// and labels: the webhook's work.
	LabelledAtCreate int `json:"labelledAtCreate"`
	// BornComplete counts the Nodes whose CREATE answer carried no uninitialized taint: the
	// webhook described them completely and lifted it (--webhook-initialize).
	BornComplete int `json:"bornComplete"`
	// Initialized counts the Nodes seen initialized before the timeout.
	Initialized int `json:"initialized"`
	// XORequests are the requests XO received during the burst, by "METHOD /path".
	XORequests map[string]int64 `json:"xoRequests"`
	// APIRequests are the API server's requests during the burst (apiserver_request_total),
	// by "VERB resource[/subresource]", for nodes and events; the benchmark's own
	// Node creations are included in "POST nodes".
	APIRequests map[string]int64 `json:"apiRequests"`
	// AdmissionMean is the mean time the API server spent calling the webhook per CREATE
	// (apiserver_admission_webhook_admission_duration_seconds); WebhookServerMean the mean time
	// the controller's webhook server took per request (controller_runtime_webhook_latency_seconds);
	// CreateServerMean the API server's mean handling time of a Node CREATE
	// (apiserver_request_duration_seconds).
	AdmissionMean time.Duration `json:"admissionMean"`
	// AdmissionP99 is the 99th percentile of the same, interpolated in the histogram's
	// buckets (bounds 5 ms, 25 ms, 100 ms, 500 ms, 1 s, 2.5 s...).
	AdmissionP99      time.Duration `json:"admissionP99"`
	WebhookServerMean time.Duration `json:"webhookServerMean"`
	CreateServerMean  time.Duration `json:"createServerMean"`
	// Conflicts are the API server's 409 Conflict answers from the first CREATE until the
	// controller went quiet after the burst (apiserver_request_total{code="409"}), by
	// "VERB resource[/subresource]", every resource included.
	Conflicts map[string]int64 `json:"conflicts"`
	// FailOpen counts webhook calls that failed and were ignored (failurePolicy Ignore).
	FailOpen int64 `json:"failOpen"`
	// CPU is the CPU time each process used during the burst.
	CPU map[string]time.Duration `json:"cpu"`
	// ControllerPeakRSS is the controller's VmHWM at the end of the burst, in bytes.
	ControllerPeakRSS int64 `json:"controllerPeakRSS"`
	// ControllerStartup is the time from starting the controller to /readyz answering OK.
	ControllerStartup time.Duration `json:"controllerStartup"`
	Load              float64       `json:"load"`
}

// Steady is the XO and API server load with Nodes that need nothing, measured over Window with
// a shortened inventory.resyncPeriod.
type Steady struct {
	// Server names the XO server when the controller has several (Estates); empty otherwise.
	Server       string        `json:"server,omitempty"`
	Nodes        int           `json:"nodes"`
	Window       time.Duration `json:"window"`
	ResyncPeriod time.Duration `json:"resyncPeriod"`
	// Relists is the number of full listings in the window (GET /rest/v0/vms).
	Relists int64 `json:"relists"`
	// XORequests are every request XO received in the window, by "METHOD /path".
	XORequests map[string]int64 `json:"xoRequests"`
	// ListBytes are the response bytes of the four listings (vms, hosts, pools, servers).
	ListBytes int64 `json:"listBytes"`
	// NodeChanges is the number of Node modifications a watch saw in the window.
	NodeChanges int64 `json:"nodeChanges"`
	// NodeChangeSamples say what changed, for the first few.
	NodeChangeSamples []string `json:"nodeChangeSamples,omitempty"`
	// APIWrites are the API server's write requests on nodes in the window (apiserver_request_total).
	APIWrites map[string]int64 `json:"apiWrites"`
	// StartupWrites are the API server's write requests on nodes from the controller's start
	// until it went quiet (it looks at every Node once).
	StartupWrites map[string]int64 `json:"startupWrites"`
}

// TotalXORequests sums the XO requests of the window.
func (s Steady) TotalXORequests() int64 { return sum(s.XORequests) }

// RequestsPerMinute is the measured rate, at ResyncPeriod.
func (s Steady) RequestsPerMinute() float64 {
	if s.Window <= 0 {
		return 0
	}
	return float64(s.TotalXORequests()) / s.Window.Minutes()
}

// RequestsPerRelist is the number of XO requests one relist costs.
func (s Steady) RequestsPerRelist() float64 {
	if s.Relists == 0 {
		return 0
	}
	return float64(s.TotalXORequests()) / float64(s.Relists)
}

// BytesPerRelist is the response size of one relist.
func (s Steady) BytesPerRelist() float64 {
	if s.Relists == 0 {
		return 0
	}
	return float64(s.ListBytes) / float64(s.Relists)
}

// RequestsPerMinuteAt extrapolates the rate to another resync period: one relist's requests
// per period (the event stream itself is one long request, not counted per minute).
func (s Steady) RequestsPerMinuteAt(resync time.Duration) float64 {
	if resync <= 0 {
		return 0
	}
	return s.RequestsPerRelist() / resync.Minutes()
}

// Upstream is the XO load of the way the existing cloud controllers work, simulated against the
// same simulator: every sync, one GET of the VM, its host and its pool for every Node, in both
// the node-status loop and the label-sync loop (each every 5 minutes in the upstream XO CCM).
type Upstream struct {
	Nodes int `json:"nodes"`
	// Requests and Bytes are those of one Period: both loops over every Node.
	Requests int64         `json:"requests"`
	Bytes    int64         `json:"bytes"`
	Elapsed  time.Duration `json:"elapsed"`
	Period   time.Duration `json:"period"`
}

// RequestsPerMinute is the upstream-style load.
func (u Upstream) RequestsPerMinute() float64 {
	if u.Period <= 0 {
		return 0
	}
	return float64(u.Requests) / u.Period.Minutes()
}

// Reaction is the time from a change made in XO to the Node reflecting it.
type Reaction struct {
	// Kind is ReactionDeleted, ReactionHalted or ReactionMigrated.
	Kind string `json:"kind"`
	// Mode is ModeEvents or ModeRelist.
	Mode    string          `json:"mode"`
	Nodes   int             `json:"nodes"`
	Samples []time.Duration `json:"samples"`
	// Failed counts the samples that timed out.
	Failed int `json:"failed"`
	// Settle is the controller's inventory.settleTime when the reaction waits it by design
	// (a VM's absence must last that long before its Node is deleted); 0 otherwise.
	Settle time.Duration `json:"settle,omitempty"`
}

// Beyond returns the samples minus the settle time: the reaction's own cost.
func (r Reaction) Beyond() []time.Duration {
	out := make([]time.Duration, len(r.Samples))
	for i, d := range r.Samples {
		out[i] = d - r.Settle
	}
	return out
}

// Reaction kinds and modes.
const (
	ReactionDeleted  = "VM deleted (Node NotReady) → Node deleted"
	ReactionHalted   = "VM halted (Node NotReady) → shutdown taint"
	ReactionMigrated = "VM migrated → zone label"
	ModeEvents       = "event stream"
	ModeRelist       = "relist only"
)

// Estates are the runs with several XO servers and with a pool scope (phase "estates").
type Estates struct {
	// Servers is the number of XO servers (simulators) of the split estate, each with
	// VMsPerServer VMs.
	Servers      int `json:"servers"`
	VMsPerServer int `json:"vmsPerServer"`
	// PoolsPerServer and HostsPerPool describe each server's inventory.
	PoolsPerServer int `json:"poolsPerServer"`
	HostsPerPool   int `json:"hostsPerPool"`
	// Split is a burst of Nodes split evenly across the servers.
	Split *Burst `json:"split,omitempty"`
	// SplitLoad is the XO load at steady state after the burst, one entry per server and
	// Node count (Server set), the Node counts in descending order.
	SplitLoad []Steady `json:"splitLoad,omitempty"`
	// SplitMemory is the controller's memory, read during the first steady-state window.
	SplitMemory *Memory `json:"splitMemory,omitempty"`
	// Outage is the burst on one server while another is down.
	Outage *Outage `json:"outage,omitempty"`
	// Scope compares a pool scope with none.
	Scope []ScopeRun `json:"scope,omitempty"`
}

// Outage is a burst of Nodes of one XO server while another server is down (its listener
// closed), then XO dropping one pool of the healthy server. NotReady Nodes of the down server
// and of the dropped pool are watched for deletions.
type Outage struct {
	// Healthy and Down name the servers (config clusters[].name).
	Healthy string `json:"healthy"`
	Down    string `json:"down"`
	// Burst holds Nodes of the healthy server only.
	Burst Burst `json:"burst"`
	// DownNodes and DroppedNodes are the NotReady Nodes of the down server and of the
	// dropped pool.
	DownNodes    int `json:"downNodes"`
	DroppedNodes int `json:"droppedNodes"`
	// Deleted lists those of them deleted while watched (want none).
	Deleted []string `json:"deleted,omitempty"`
	// Watched is how long they were watched after the pool was dropped.
	Watched time.Duration `json:"watched"`
}

// ScopeRun is the controller with one XO server, with or without a pool scope.
type ScopeRun struct {
	// ScopePools is the number of pools in the server's scope, 0 for no scope; Pools and VMs
	// are XO's, ScopeVMs those in scope, Nodes those of the cluster (all of VMs in scope).
	ScopePools int `json:"scopePools"`
	Pools      int `json:"pools"`
	VMs        int `json:"vms"`
	ScopeVMs   int `json:"scopeVMs"`
	Nodes      int `json:"nodes"`
	// HeldVMs is the number of VMs the controller's inventory holds
	// (xenorchestra_inventory_objects{collection="vms"}).
	HeldVMs int64 `json:"heldVMs"`
	// Burst created the Nodes, in the first run only.
	Burst *Burst `json:"burst,omitempty"`
	// Load is the XO load over the steady-state window; Memory the readings taken during it.
	Load   Steady `json:"load"`
	Memory Memory `json:"memory"`
}

// Large is the large-XO phase (issue #13): an XO of VMs in Pools × HostsPerPool hosts of which
// a few are Nodes, with the inventory scoped to the Nodes' pools and without a scope.
type Large struct {
	Pools        int        `json:"pools"`
	HostsPerPool int        `json:"hostsPerPool"`
	VMs          int        `json:"vms"`
	Runs         []LargeRun `json:"runs"`
}

// LargeRun is one configuration of the large-XO phase.
type LargeRun struct {
	// ScopePools is the number of pools in scope (0: no scope); ScopeVMs the VMs of XO in
	// them (all VMs without a scope); HeldVMs those the inventory holds.
	ScopePools int   `json:"scopePools"`
	ScopeVMs   int   `json:"scopeVMs"`
	HeldVMs    int64 `json:"heldVMs"`
	Nodes      int   `json:"nodes"`
	// Burst is a burst of part of the Nodes on a cluster without any.
	Burst Burst `json:"burst"`
	// Load and Memory are read at steady state with every Node; RelistMean is the controller's
	// mean relist time over the window (xenorchestra_inventory_relist_duration_seconds).
	Load       Steady        `json:"load"`
	Memory     Memory        `json:"memory"`
	RelistMean time.Duration `json:"relistMean"`
	// Events VM changes were made in XO (tags of VMs that are not Nodes) as fast as the
	// simulator takes them, over SimTook; Applied of them reached the controllers (changes
	// published, xenorchestra_inventory_changes_total), the last AppliedAfter the first change.
	Events       int           `json:"events"`
	SimTook      time.Duration `json:"simTook"`
	Applied      int64         `json:"applied"`
	AppliedAfter time.Duration `json:"appliedAfter"`
}

// Memory is the controller's resident memory at rest with Nodes and VMs.
type Memory struct {
	Nodes int `json:"nodes"`
	VMs   int `json:"vms"`
	// RSS is VmRSS once the controller has looked at every Node and gone quiet: the median of
	// Readings, with RSSMax the highest of them.
	RSS      int64 `json:"rss"`
	RSSMax   int64 `json:"rssMax"`
	Readings int   `json:"readings"`
	// RSSRelisting is the highest reading while the controller relists every 30 s (the
	// steady-state run): the inventory's relist briefly holds two copies of it.
	RSSRelisting int64 `json:"rssRelisting"`
	// HWM is VmHWM (the process's peak, start-up included) at the last reading.
	HWM int64 `json:"hwm"`
	// RSSFile is the part of RSS mapped from the binary (RssFile, median): code and read-only
	// data, clean pages the kernel reclaims under pressure.
	RSSFile    int64 `json:"rssFile"`
	HeapInuse  int64 `json:"heapInuse"`
	Goroutines int   `json:"goroutines"`
}

// MedianMemory combines readings: the median resident set and heap, the highest resident set,
// and the last peak and goroutine count. ms must not be empty.
func MedianMemory(ms []Memory) Memory {
	rss := make([]int64, len(ms))
	heap := make([]int64, len(ms))
	file := make([]int64, len(ms))
	out := ms[len(ms)-1]
	out.RSSMax = 0
	for i, m := range ms {
		rss[i], heap[i], file[i] = m.RSS, m.HeapInuse, m.RSSFile
		out.RSSMax = max(out.RSSMax, m.RSS)
	}
	slices.Sort(rss)
	slices.Sort(heap)
	slices.Sort(file)
	out.RSS, out.HeapInuse, out.RSSFile, out.Readings = rss[len(rss)/2], heap[len(heap)/2], file[len(file)/2], len(ms)
	return out
}

// Churn is a run where VMs are created (with their Nodes), migrated and deleted continuously.
type Churn struct {
	Duration time.Duration `json:"duration"`
	Nodes    int           `json:"nodes"`
	VMs      int           `json:"vms"`
	Created  int           `json:"created"`
	Migrated int           `json:"migrated"`
	Deleted  int           `json:"deleted"`
	// InitP50 and InitP99 are the initialization times of the Nodes created during the run;
	// DeleteP50 and DeleteP99 the times from VM removal to Node deletion.
	InitP50   time.Duration `json:"initP50"`
	InitP99   time.Duration `json:"initP99"`
	DeleteP50 time.Duration `json:"deleteP50"`
	DeleteP99 time.Duration `json:"deleteP99"`
	// Samples are taken every Interval, the first after Warmup.
	Samples  []MemSample   `json:"samples"`
	Interval time.Duration `json:"interval"`
	Warmup   time.Duration `json:"warmup"`
	// Unsettled lists Nodes not in their expected state at the end.
	Unsettled []string `json:"unsettled,omitempty"`
}

// MemSample is one reading of the controller's memory.
type MemSample struct {
	At         time.Duration `json:"at"`
	RSS        int64         `json:"rss"`
	HeapInuse  int64         `json:"heapInuse"`
	Goroutines int           `json:"goroutines"`
}

// RSSGrowth returns the RSS of the last sample minus the first, and the slope of a least-squares
// line through the second half of the samples (after warm-up), in bytes per minute.
func (c Churn) RSSGrowth() (delta int64, perMinute float64) {
	if len(c.Samples) < 2 {
		return 0, 0
	}
	delta = c.Samples[len(c.Samples)-1].RSS - c.Samples[0].RSS
	half := c.Samples[len(c.Samples)/2:]
	if len(half) < 2 {
		return delta, 0
	}
	var sx, sy, sxx, sxy float64
	for _, s := range half {
		x, y := s.At.Minutes(), float64(s.RSS)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(half))
	den := n*sxx - sx*sx
	if den == 0 {
		return delta, 0
	}
	return delta, (n*sxy - sx*sy) / den
}

// Bounded reports whether memory stayed bounded over the run: the highest resident set of its
// second half is within 10% (plus 8 MiB of slack for the garbage collector's timing) of the
// highest of its first half, and the goroutines did not grow by more than 20. Fewer than 4
// samples show nothing, so they do not count as bounded.
func (c Churn) Bounded() bool {
	if len(c.Samples) < 4 {
		return false
	}
	mid := len(c.Samples) / 2
	peak := func(s []MemSample) int64 {
		var m int64
		for _, x := range s {
			m = max(m, x.RSS)
		}
		return m
	}
	first, second := peak(c.Samples[:mid]), peak(c.Samples[mid:])
	g0, g1 := c.Samples[0].Goroutines, c.Samples[len(c.Samples)-1].Goroutines
	return float64(second) <= 1.1*float64(first)+8<<20 && g1 <= g0+20
}

// Percentile returns the p-th percentile (0 < p ≤ 1, nearest rank) of d, 0 for none. d is not
// modified.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 || p <= 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func sum(m map[string]int64) int64 {
	var t int64
	for _, v := range m {
		t += v
	}
	return t
}
