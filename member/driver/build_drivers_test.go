package driver

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/member/capsule"
)

// The same test runs in both builds: the default one serves every driver, one made with -tags offline
// (CI runs this package's tests both ways) refuses openai and anthropic with ErrLeftOut and names the
// command that installs a mur serving them.
func TestBuildServesWhatThisBuildHas(t *testing.T) {
	const path = "/w/murmur.yaml"
	getenv := func(k string) string { return map[string]string{"KEY": "sk-test"}[k] }
	leftOut := func(drv string) string {
		return `driver "` + drv + `" is left out of this build of mur: it was built with -tags offline, which serves the script driver alone; install the mur that serves every driver, from the repository root: go install ./cmd/mur`
	}
	for _, tc := range []struct {
		name    string
		start   string // the starting choice: local (script), gpt (openai) or claude (anthropic)
		wantErr string // what an offline build answers; the default build makes every driver
	}{
		{name: "starts on script", start: "local"},
		{name: "starts on openai", start: "gpt",
			wantErr: path + ": inference.driver gpt: " + leftOut("openai")},
		{name: "starts on anthropic", start: "claude",
			wantErr: path + ": inference.driver claude: " + leftOut("anthropic")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := capsule.Parse(path, []byte("name: lead\ninference:\n  driver: "+tc.start+"\n  choices:\n"+
				"    local: {driver: script}\n"+
				"    gpt: {driver: openai, model: m, credential: env:KEY}\n"+
				"    claude: {driver: anthropic, model: m, credential: env:KEY}\n"))
			if err != nil {
				t.Fatal(err)
			}
			served, err := Build(c, nil, getenv)
			if !ModelDrivers && tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrLeftOut) {
					t.Fatalf("Build: %v, want an error wrapping ErrLeftOut", err)
				}
				if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
					t.Errorf("Build's error (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			want := []string{"claude", "gpt", "local"}
			if !ModelDrivers {
				want = []string{"local"}
			}
			got := make([]string, 0, len(served))
			for name := range served {
				got = append(got, name)
			}
			slices.Sort(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("served choices (-want +got):\n%s", diff)
			}
			for _, choice := range []string{"gpt", "claude"} {
				err := CheckChoice(c.Inference, served, choice, getenv)
				if ModelDrivers {
					if err != nil {
						t.Errorf("CheckChoice(%s): %v", choice, err)
					}
					continue
				}
				drv := c.Inference.Choices[choice].Driver
				if diff := cmp.Diff("driver choice "+choice+": "+leftOut(drv), errText(err)); diff != "" || !errors.Is(err, ErrLeftOut) {
					t.Errorf("CheckChoice(%s) (-want +got):\n%s", choice, diff)
				}
			}
		})
	}
	for _, drv := range []string{capsule.DriverScript, capsule.DriverOpenAI, capsule.DriverAnthropic} {
		err := Serves(drv)
		if (err != nil) != (drv != capsule.DriverScript && !ModelDrivers) {
			t.Errorf("Serves(%s) = %v with ModelDrivers %v", drv, err, ModelDrivers)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
