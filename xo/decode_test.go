package xo

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

func vmID(v *VM) string { return v.ID }

func TestDecodeNDJSON(t *testing.T) {
	in := strings.Join([]string{
		`{"id":"a","name_label":"one","power_state":"Running","CPUs":{"max":2,"number":2},"memory":{"dynamic":[1,2],"static":[3],"size":2},"tags":["x"],"addresses":{"0/ipv4/0":"10.0.0.1"},"mainIpAddress":"10.0.0.1","$pool":"p","$container":"h","href":"/rest/v0/vms/a"}`,
		`{"id":"b","name_label":null,"CPUs":null,"memory":null,"tags":null,"addresses":null,"extra":{"nested":[1,2,3]}}`,
		`{"id":"a","name_label":"duplicate"}`,
		`{"name_label":"no id"}`,
		``,
	}, "\n")
	var got []*VM
	n, err := decodeNDJSON(strings.NewReader(in), vmID, func(v *VM) { got = append(got, v) })
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || len(got) != 2 {
		t.Fatalf("decoded %d (%d distinct), want 2", len(got), n)
	}
	if got[0].NameLabel != "one" || got[0].CPUs.Max != 2 || got[0].Memory != (Memory{Dynamic: [2]int64{1, 2}, Static: [2]int64{3, 0}, Size: 2}) || !slices.Equal(got[0].Addresses, Addresses{{Key: "0/ipv4/0", IP: "10.0.0.1"}}) {
		t.Fatalf("first VM decoded wrong: %+v", got[0])
	}
	if got[1].NameLabel != "" || got[1].Tags != nil {
		t.Fatalf("nulls decoded wrong: %+v", got[1])
	}
}

func TestDecodeNDJSONTruncated(t *testing.T) {
	in := `{"id":"a"}` + "\n" + `{"id":"b","name_lab`
	n, err := decodeNDJSON(strings.NewReader(in), vmID, func(*VM) {})
	if err == nil {
		t.Fatalf("a value cut in the middle decoded without error (%d objects)", n)
	}
}

// TestBoundedReader checks the bounds of a listing: a line longer than the limit (whether it
// arrives in one read or across many) and a body longer than the total both fail.
func TestBoundedReader(t *testing.T) {
	read := func(body string, chunk int, line, total int) error {
		r := &boundedReader{r: chunked(strings.NewReader(body), chunk), line: line, total: total}
		_, err := io.ReadAll(r)
		return err
	}
	ok := "12345\n1234\n\n123"
	for _, chunk := range []int{1, 3, 100} {
		if err := read(ok, chunk, 5, 100); err != nil {
			t.Errorf("chunk %d: lines within the limit refused: %v", chunk, err)
		}
		if err := read("1234\n123456\n", chunk, 5, 100); err == nil || !strings.Contains(err.Error(), "object larger") {
			t.Errorf("chunk %d: a 6-byte line passed a 5-byte limit: %v", chunk, err)
		}
		if err := read(ok, chunk, 5, 10); err == nil || !strings.Contains(err.Error(), "listing larger") {
			t.Errorf("chunk %d: 16 bytes passed a 10-byte total: %v", chunk, err)
		}
	}
}

// chunked returns r read at most chunk bytes at a time.
func chunked(r io.Reader, chunk int) io.Reader {
	return readerFunc(func(p []byte) (int, error) { return r.Read(p[:min(len(p), chunk)]) })
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func TestStatusError(t *testing.T) {
	cases := []struct {
		status int
		ctype  string
		body   string
		kind   Kind
		msg    string
	}{
		{404, "application/json; charset=utf-8", `{"error":"no such VM x","data":{"id":"x","type":"VM"}}`, KindNotFound, "no such VM x"},
		{404, "text/html", `<html>Cannot GET /rest/v0/nope</html>`, KindBadResponse, "unknown route"},
		{404, "application/json", `{"error":"something else"}`, KindBadResponse, "something else"},
		{401, "application/json", `{"error":"invalid credentials"}`, KindUnauthorized, "invalid credentials"},
		{401, "text/plain", `Unauthorized`, KindUnauthorized, "Unauthorized"},
		{403, "application/json", `{"error":"not enough permissions"}`, KindForbidden, "not enough permissions"},
		{422, "application/json", `{"error":{"limit":{"message":"invalid float number","value":"abc"}},"data":{}}`, KindBadResponse, "invalid float number"},
		{400, "application/json", `{"error":"parse error: expected end of input at position 3","data":{"stringToParse":"a:b c)"}}`, KindBadResponse, "parse error"},
		{500, "application/json", `{"error":"x","info":"This is a XenServer/XCP-ng error, not an XO error"}`, KindServerError, "x"},
		{503, "text/html", strings.Repeat("y", 1000), KindServerError, "yyyy"},
		{429, "", "", KindServerError, ""},
	}
	for _, tc := range cases {
		e := statusError("op", tc.status, tc.ctype, []byte(tc.body))
		if e.Kind != tc.kind || !strings.Contains(e.Message, tc.msg) || len(e.Message) > maxMessage+4 {
			t.Errorf("%d %s: kind %s message %q; want %s containing %q", tc.status, tc.body, e.Kind, e.Message, tc.kind, tc.msg)
		}
	}
}

func FuzzDecodeNDJSON(f *testing.F) {
	f.Add([]byte(`{"id":"a","CPUs":{"max":2},"memory":{"dynamic":[1,2]}}` + "\n" + `{"id":"a"}`))
	f.Add([]byte(`{"id":1}`))
	f.Add([]byte(`"/rest/v0/vms/a"` + "\n"))
	f.Add([]byte(`{"id":"a","addresses":{"0/ipv4/0":null},"tags":[null]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		seen := map[string]bool{}
		n, _ := decodeNDJSON(bytes.NewReader(data), vmID, func(v *VM) {
			if v.ID == "" || seen[v.ID] {
				t.Fatalf("passed an empty or duplicate id %q", v.ID)
			}
			seen[v.ID] = true
		})
		if n != len(seen) {
			t.Fatalf("count %d, passed %d", n, len(seen))
		}
	})
}

func FuzzParseEvent(f *testing.F) {
	f.Add("update", []byte(`{"$subscription":"VM","id":"a","power_state":"Halted"}`))
	f.Add("remove", []byte(`{"$subscription":"pool","id":"p"}`))
	f.Add("add", []byte(`{"$subscription":"host"}`))
	f.Fuzz(func(t *testing.T, event string, data []byte) {
		ev, ok, err := parseEvent(event, data)
		if ok && (err != nil || (ev.VM == nil && ev.Host == nil && ev.Pool == nil)) {
			t.Fatalf("ok event without object: %+v %v", ev, err)
		}
	})
}

// BenchmarkDecodeVMs decodes a 10,000-VM ndjson listing as XO sends it (only the fields the
// inventory asks for).
func BenchmarkDecodeVMs(b *testing.B) {
	var buf bytes.Buffer
	const n = 10000
	for i := range n {
		fmt.Fprintf(&buf, `{"id":"3f1c2b7e-0c4a-4d2b-9e51-%012x","name_label":"k8s-worker-%d","power_state":"Running","$pool":"5e0b1a6c-8f2d-4c39-a1e7-0d9b3c4f2a10","$container":"b61a5c92-700e-4966-a13b-00633f03eea8","CPUs":{"max":4,"number":4},"memory":{"dynamic":[8589934592,8589934592],"static":[2147483648,8589934592],"size":8589934592},"tags":["k8s","cluster=prod"],"addresses":{"0/ipv4/0":"10.0.%d.%d","0/ipv6/0":"fd00::%x"},"mainIpAddress":"10.0.%d.%d","href":"/rest/v0/vms/3f1c2b7e-0c4a-4d2b-9e51-%012x"}`+"\n",
			i, i, i/256, i%256, i, i/256, i%256, i)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		count := 0
		if _, err := decodeNDJSON(io.Reader(bytes.NewReader(data)), vmID, func(*VM) { count++ }); err != nil || count != n {
			b.Fatal(err, count)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/vm")
}
