package stage

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/driver"
)

// The same test runs in both builds (CI runs this package's tests with -tags offline too): a mur
// built with -tags offline refuses a capsule that starts on openai or anthropic (E-DRV-001) and warns
// of another choice it cannot switch to (W-DRV-001), each naming the command that installs a mur
// serving every driver; the default build finds nothing.
func TestDriverFindingsNameTheFullBuild(t *testing.T) {
	const path = "/w/murmur.yaml"
	leftOut := func(drv string) string {
		return `driver "` + drv + `" is left out of this build of mur: it was built with -tags offline, which serves the script driver alone; install the mur that serves every driver, from the repository root: go install ./cmd/mur`
	}
	getenv := func(k string) string { return map[string]string{"KEY": "sk-test"}[k] }
	for _, tc := range []struct {
		start string
		want  []Finding // in an offline build
	}{
		{"local", []Finding{
			{Code: CodeDriverMissingW, Member: "lead", Message: path + ": driver choice gpt cannot be switched to: " + leftOut("openai")},
			{Code: CodeDriverMissingW, Member: "lead", Message: path + ": driver choice claude cannot be switched to: " + leftOut("anthropic")},
		}},
		{"gpt", []Finding{
			{Code: CodeDriverMissingW, Member: "lead", Message: path + ": driver choice claude cannot be switched to: " + leftOut("anthropic")},
			{Code: CodeDriverMissing, Member: "lead", Message: path + ": inference.driver gpt: " + leftOut("openai")},
		}},
	} {
		t.Run("starts on "+tc.start, func(t *testing.T) {
			c, err := capsule.Parse(path, []byte("name: lead\ninference:\n  driver: "+tc.start+"\n  choices:\n"+
				"    local: {driver: script}\n"+
				"    gpt: {driver: openai, model: m, credential: env:KEY}\n"+
				"    claude: {driver: anthropic, model: m, credential: env:KEY}\n"))
			if err != nil {
				t.Fatal(err)
			}
			var got []Finding
			for _, f := range Capsule(c, "lead", getenv) {
				if f.Code == CodeDriverMissing || f.Code == CodeDriverMissingW {
					got = append(got, f)
				}
			}
			want := tc.want
			if driver.ModelDrivers {
				want = nil
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("driver findings (-want +got):\n%s", diff)
			}
		})
	}
}
