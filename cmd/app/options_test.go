package app

import (
	"flag"
	"strings"
	"testing"
)

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		args []string
		want []string // substrings of the error; none means valid
	}{
		{args: nil},
		{args: []string{"--controllers=cloud-node,cloud-node-label-sync"}},
		{args: []string{"--controllers=", "--webhook=false"}},
		{args: []string{"--controllers=cloud-node,nope", "--workers=0", "--kube-api-qps=0", "--webhook-port=70000"},
			want: []string{`unknown controller "nope"`, "--workers", "--kube-api-qps", "--webhook-port"}},
		{args: []string{"--leader-elect-renew-deadline=20s"}, want: []string{"--leader-elect-*"}},
		{args: []string{"--leader-elect=false", "--leader-elect-renew-deadline=20s"}},
		{args: []string{"--webhook-lookup-timeout=30s"}, want: []string{"--webhook-lookup-timeout"}},
	}
	for _, tc := range cases {
		o := NewOptions()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := o.Validate()
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%v: %v", tc.args, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%v: no error", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not name %q", tc.args, err, w)
			}
		}
	}
}

func TestEnabledControllers(t *testing.T) {
	o := NewOptions()
	if got := o.EnabledControllers(); len(got) != 3 {
		t.Fatalf("* gave %v", got)
	}
	o.Controllers = " cloud-node , cloud-node ,"
	if got := o.EnabledControllers(); len(got) != 1 || got[0] != CloudNode {
		t.Fatalf("got %v", got)
	}
}
