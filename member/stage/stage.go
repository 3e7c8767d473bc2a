package stage

import (
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/harness"
	"github.com/murmur-run/murmur/member/sandbox"
	"github.com/murmur-run/murmur/roster"
)

// Finding is one staging error or warning, printed as "CODE: message". Codes starting with E- stop
// staging; W- codes do not.
type Finding struct {
	Code    string
	Member  string
	Message string
}

func (f Finding) String() string {
	if f.Member == "" {
		return f.Code + ": " + f.Message
	}
	return fmt.Sprintf("%s: member %s: %s", f.Code, f.Member, f.Message)
}

// IsError reports whether the finding stops staging.
func (f Finding) IsError() bool { return len(f.Code) > 0 && f.Code[0] == 'E' }

// The staging codes of this build (docs/codes.md lists them).
const (
	CodeCapsuleInvalid = "E-CFG-001"     // murmur.yaml does not parse or validate
	CodeScriptInvalid  = "E-CFG-002"     // a script driver's script.yaml does not parse or validate
	CodeDriverMissing  = "E-DRV-001"     // the starting driver choice uses a driver this build does not serve
	CodeDriverMissingW = "W-DRV-001"     // another driver choice uses a driver this build leaves out: switching to it is refused
	CodeNoCredential   = "E-DRV-002"     // the starting driver choice's credential produces no value
	CodeNoCredentialW  = "W-DRV-002"     // another driver choice's credential produces no value: switching to it is refused
	CodeReservedName   = "E-CAP-013"     // an artifact named like a runtime-provided tool
	CodeNoEgress       = "W-RUN-008"     // a member that may call others cannot reach them
	CodeShellMissing   = "E-SHELL-001"   // a capabilities.shell.allow name is on none of the trusted PATH's directories
	CodeShellOpen      = "W-SHELL-002"   // shell commands run without the write confinement
	CodeShellReach     = "W-SHELL-003"   // processes that leave a command's process group outlive it
	CodeShellMemory    = "W-SHELL-004"   // the memory limit is an address-space limit the runtime cannot attribute
	CodeShellReads     = "W-SHELL-005"   // commands may read every file the user can: no Landlock, or confine: false
	CodeShellNetwork   = "W-SHELL-006"   // commands keep the network without capabilities.shell.network: no way to cut it off
	CodeHarnessMissing = "E-HARNESS-001" // harness.command[0] is no executable file (transport: process)
	CodeHarnessNetwork = "W-HARNESS-002" // harness.network: false cannot be enforced on this host
	CodeHarnessSecret  = "W-HARNESS-003" // a harness.env entry carries a secret of the runtime's: it is left out
	CodeHarnessPrompt  = "W-HARNESS-004" // the harness's command line has no {instructions}: it never gets the system prompt
)

// Formation stages every member of r (or only those named) without starting anything and returns
// every finding, in roster order.
func Formation(r *roster.Roster, only []string, getenv func(string) string) []Finding {
	out, _ := FormationCapsules(r, only, getenv)
	return out
}

// FormationCapsules is Formation that also returns the capsules it loaded, by the roster's capsule
// directory (roster.Member's Capsule), those that loaded: what mur run starts the members on, so that
// each capsule is read and parsed once (server.FormationConfig's Capsules). The members are staged side
// by side, one for each CPU; a capsule directory several members run is loaded once.
func FormationCapsules(r *roster.Roster, only []string, getenv func(string) string) ([]Finding, map[string]*capsule.Capsule) {
	st := staging{isolation: sync.OnceValue(sandbox.Probe), landlock: sync.OnceValue(sandbox.LandlockABI), members: members(r)}
	var staged []roster.Member
	for _, m := range r.Members {
		if len(only) == 0 || slices.Contains(only, m.Name) {
			staged = append(staged, m)
		}
	}
	var mu sync.Mutex // guards loads
	loads := map[string]func() (*capsule.Capsule, error){}
	load := func(dir string) (*capsule.Capsule, error) {
		mu.Lock()
		f, ok := loads[dir]
		if !ok {
			f = sync.OnceValues(func() (*capsule.Capsule, error) { return capsule.Load(dir) })
			loads[dir] = f
		}
		mu.Unlock()
		return f()
	}
	found := make([][]Finding, len(staged))
	next := make(chan int, len(staged))
	for i := range staged {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(staged)) {
		wg.Go(func() {
			for i := range next {
				found[i] = memberFindings(r, staged[i], getenv, st, load)
			}
		})
	}
	wg.Wait()
	var out []Finding
	for _, f := range found {
		out = append(out, f...)
	}
	loaded := map[string]*capsule.Capsule{}
	for dir, f := range loads {
		if c, err := f(); err == nil {
			loaded[dir] = c
		}
	}
	return out, loaded
}

// memberFindings stages member m of r, its capsule from load.
func memberFindings(r *roster.Roster, m roster.Member, getenv func(string) string, st staging, load func(string) (*capsule.Capsule, error)) []Finding {
	c, err := load(m.Capsule)
	if err != nil {
		var out []Finding
		for _, e := range splitJoined(err) {
			out = append(out, Finding{Code: CodeCapsuleInvalid, Member: m.Name, Message: e.Error()})
		}
		return out
	}
	out := capsuleFindings(c, m.Name, getenv, st)
	out = append(out, storeFindings(m, getenv)...)
	out = append(out, artifactFindings(c, m.Name, r.Dir, getenv)...)
	out = append(out, spawnFindings(c, m.Name, r.Dir, getenv)...)
	return append(out, egressFindings(r, m, c, st.members)...)
}

// staging is what staging asks of the machine and of the roster once for a whole formation, not once
// per member: a formation of a thousand members probed the host a thousand times.
type staging struct {
	isolation func() sandbox.Isolation
	landlock  func() int
	members   map[string]roster.Member // the roster's members, by name
}

// capsuleStaging asks the machine afresh, for one capsule.
func capsuleStaging() staging {
	return staging{isolation: sandbox.Probe, landlock: sandbox.LandlockABI}
}

// members indexes r's members by name.
func members(r *roster.Roster) map[string]roster.Member {
	out := make(map[string]roster.Member, len(r.Members))
	for _, m := range r.Members {
		out[m.Name] = m
	}
	return out
}

// Egress is Formation's CodeNoEgress findings alone: what mur export prints, as every container would,
// without reaching any member's database or artifact store.
func Egress(r *roster.Roster) []Finding {
	var out []Finding
	byName := members(r)
	for _, m := range r.Members {
		if c, err := capsule.Load(m.Capsule); err == nil {
			out = append(out, egressFindings(r, m, c, byName)...)
		}
	}
	return out
}

// egressFindings are the members m may call that its capsule c's capabilities.network.allow leaves out;
// byName is r's members by name.
func egressFindings(r *roster.Roster, m roster.Member, c *capsule.Capsule, byName map[string]roster.Member) []Finding {
	var out []Finding
	for _, callee := range r.Reachable(m.Name) {
		peer := byName[callee]
		if !roster.EgressAllowed(peer.URL, c.Capabilities.Network.Allow) {
			host := peer.URL
			if u, err := url.Parse(peer.URL); err == nil && u.Hostname() != "" {
				host = u.Hostname()
			}
			out = append(out, Finding{Code: CodeNoEgress, Member: m.Name, Message: fmt.Sprintf(
				"may call %s at %s, but capabilities.network.allow in %s does not list %s, so every call to it will fail; add %s to capabilities.network.allow%s",
				callee, peer.URL, c.Path, egressName(host), egressName(host), containerHint(callee, host))})
		}
	}
	return out
}

// containerHint says what W-RUN-008 means in a container formation (mur export), where each member's
// door is reached by its service name, which is the member's name, rather than on loopback.
func containerHint(callee, host string) string {
	if egressName(host) == "localhost" {
		return fmt.Sprintf(". In a container formation (mur export) members reach each other by service name instead: list %s there too", callee)
	}
	if strings.EqualFold(host, callee) {
		return fmt.Sprintf(" (in a container formation, %s is the service name of member %s)", host, callee)
	}
	return ""
}

// egressName is what network.allow must list for host: localhost for any loopback address.
func egressName(host string) string {
	if roster.EgressAllowed("http://"+host, []string{"localhost"}) {
		return "localhost"
	}
	return host
}

// Capsule returns the staging findings of one capsule.
func Capsule(c *capsule.Capsule, memberName string, getenv func(string) string) []Finding {
	return capsuleFindings(c, memberName, getenv, capsuleStaging())
}

func capsuleFindings(c *capsule.Capsule, memberName string, getenv func(string) string, st staging) []Finding {
	var out []Finding
	if c.IsAgent() && len(c.Capabilities.Shell.Allow) > 0 {
		for _, name := range c.Capabilities.Shell.Allow {
			if _, err := sandbox.ResolveShell(name); err != nil {
				out = append(out, Finding{Code: CodeShellMissing, Member: memberName, Message: fmt.Sprintf("%s: %v", c.Path, err)})
			}
		}
	}
	if h := c.Harness; h != nil {
		if _, err := sandbox.ResolveCommand(c.Dir, h.Command[0]); err != nil {
			out = append(out, Finding{Code: CodeHarnessMissing, Member: memberName, Message: fmt.Sprintf("%s: harness.command: %v", c.Path, err)})
		}
		if !h.Network && st.landlock() < sandbox.LandlockTCPABI {
			out = append(out, Finding{Code: CodeHarnessNetwork, Member: memberName, Message: fmt.Sprintf(
				"%s: harness.network is false, but this kernel's Landlock has no TCP rules, so the harness keeps the network (it must reach its tool server on loopback, so it gets no network namespace); use Linux 6.7 or later with Landlock", c.Path)})
		}
		if f, ok := harnessPromptFinding(c, memberName); ok {
			out = append(out, f)
		}
		_, dropped := sandbox.DropSecrets(harness.ResolveEnv(h.Env, getenv), envSecrets(getenv))
		for _, d := range dropped {
			out = append(out, Finding{Code: CodeHarnessSecret, Member: memberName, Message: fmt.Sprintf(
				"%s: harness.env %s is left out, and the harness never gets it: %s; a harness must not hold the runtime's tokens or credentials", c.Path, d.Name, d.Reason)})
		}
	}
	if c.RunsCommands() {
		out = append(out, confinementFindings(c, memberName, st.landlock(), st.isolation())...)
	}
	if c.IsAgent() && c.Harness == nil {
		for _, name := range c.Inference.ChoiceOrder {
			ch := c.Inference.Choices[name]
			if err := driver.Serves(ch.Driver); err != nil && name != c.Inference.Driver { // the starting choice: Build's error below
				out = append(out, Finding{Code: CodeDriverMissingW, Member: memberName, Message: fmt.Sprintf(
					"%s: driver choice %s cannot be switched to: %v", c.Path, name, err)})
			}
			if ch.Credential == "" {
				continue
			}
			if _, err := driver.ResolveCredential(ch.Credential, getenv); err != nil {
				if name == c.Inference.Driver {
					out = append(out, Finding{Code: CodeNoCredential, Member: memberName, Message: fmt.Sprintf(
						"%s: inference.driver %s starts the session, but %v", c.Path, name, err)})
				} else {
					out = append(out, Finding{Code: CodeNoCredentialW, Member: memberName, Message: fmt.Sprintf(
						"%s: driver choice %s: %v; switch-driver to it is refused until it has a value", c.Path, name, err)})
				}
			}
		}
		if _, err := driver.Build(c, nil, getenv); err != nil {
			code := CodeDriverMissing
			var se *driver.ScriptError
			if errors.As(err, &se) {
				code = CodeScriptInvalid
			}
			for _, e := range splitJoined(err) {
				out = append(out, Finding{Code: code, Member: memberName, Message: e.Error()})
			}
		}
	}
	return out
}

// envSecrets are the runtime's secrets mur check can know: the tokens its environment gives. The ones
// mur generates into the data directory are known only once members start, which leaves such an entry
// out too, and logs it.
func envSecrets(getenv func(string) string) []sandbox.Secret {
	return []sandbox.Secret{
		{What: "the operator token (MUR_OPERATOR_TOKEN)", Value: strings.TrimSpace(getenv("MUR_OPERATOR_TOKEN"))},
		{What: "the formation token (MUR_FORMATION_TOKEN)", Value: strings.TrimSpace(getenv("MUR_FORMATION_TOKEN"))},
		{What: "the control token (MUR_CONTROL_TOKEN)", Value: strings.TrimSpace(getenv("MUR_CONTROL_TOKEN"))},
	}
}

// confinementFindings warns about what the host (its Landlock ABI, abi, 0 for none, and iso) or the
// capsule leaves out of a command's confinement.
func confinementFindings(c *capsule.Capsule, memberName string, abi int, iso sandbox.Isolation) []Finding {
	var out []Finding
	off := c.Capabilities.Shell.Confine != nil && !*c.Capabilities.Shell.Confine
	switch {
	case off:
		out = append(out, Finding{Code: CodeShellOpen, Member: memberName, Message: fmt.Sprintf(
			"%s: capabilities.shell.confine is false: %s may write anywhere this user can", c.Path, commandsOf(c))},
			Finding{Code: CodeShellReads, Member: memberName, Message: fmt.Sprintf(
				"%s: capabilities.shell.confine is false: %s may read anything this user can, the formation's tokens and task stores, the records and $HOME included", c.Path, commandsOf(c))})
	case abi == 0:
		out = append(out, Finding{Code: CodeShellOpen, Member: memberName, Message: fmt.Sprintf(
			"%s: this kernel does not enforce Landlock, so %s %s without the write confinement", c.Path, commandsOf(c), verb(c, "run"))},
			Finding{Code: CodeShellReads, Member: memberName, Message: fmt.Sprintf(
				"%s: this kernel does not enforce Landlock (or a seccomp filter hides it), so %s may read anything this user can, the formation's tokens and task stores, the records and $HOME included; run mur on Linux 5.13 or later with Landlock enabled", c.Path, commandsOf(c))})
	}
	limited := c.IsAgent() && len(c.Capabilities.Shell.Allow) > 0 || c.Capabilities.Shell.MemoryMB > 0
	for _, f := range isolationFindings(c, memberName, iso) {
		if f.Code != CodeShellMemory || limited { // without a memory limit there is nothing to apply
			out = append(out, f)
		}
	}
	onlyHarness := c.Harness != nil && len(c.Capabilities.Shell.Allow) == 0 && c.Lifecycle.DoneCheck == nil
	if !onlyHarness && !c.Capabilities.Shell.Network && iso.NetNS == 0 && (off || abi < sandbox.LandlockTCPABI) {
		out = append(out, Finding{Code: CodeShellNetwork, Member: memberName, Message: fmt.Sprintf(
			"%s: this host gives mur no network namespace and %s, so %s %s the network although capabilities.shell.network is not true: the formation's doors and anything else this host reaches; run mur as root, allow unprivileged user namespaces, or use Linux 6.7 or later with Landlock",
			c.Path, map[bool]string{true: "capabilities.shell.confine is false", false: "this kernel's Landlock has no TCP rules"}[off], commandsOf(c), verb(c, "keep"))})
	}
	return out
}

// commandsOf names what a capsule runs, for findings.
func commandsOf(c *capsule.Capsule) string {
	switch {
	case !c.IsAgent():
		return "the script command"
	case len(c.Capabilities.Shell.Allow) > 0:
		return "shell commands"
	case c.Harness != nil && c.Lifecycle.DoneCheck == nil:
		return "the harness"
	}
	return "lifecycle.done_check's command"
}

// verb agrees a verb with commandsOf(c): "shell commands run", "the script command runs".
func verb(c *capsule.Capsule, v string) string {
	if c.IsAgent() && len(c.Capabilities.Shell.Allow) > 0 {
		return v
	}
	return v + "s"
}

// isolationFindings warns about what this host does not let mur put around a capsule's shell commands.
func isolationFindings(c *capsule.Capsule, memberName string, iso sandbox.Isolation) []Finding {
	var out []Finding
	if !iso.TreeKill() {
		out = append(out, Finding{Code: CodeShellReach, Member: memberName, Message: fmt.Sprintf(
			"%s: this host gives mur neither a PID namespace nor a cgroup v2 directory it may write, so a process a shell command starts that leaves its process group (setsid, a double fork) outlives the command, a stop and the session; run mur as root, allow unprivileged user namespaces, or delegate a cgroup v2 subtree to mur's user", c.Path)})
	}
	if iso.MemBase == "" {
		out = append(out, Finding{Code: CodeShellMemory, Member: memberName, Message: fmt.Sprintf(
			"%s: this host gives mur no memory cgroup it may write, so capabilities.shell.memory_mb is applied as an address-space limit (RLIMIT_AS): a command over it sees failed allocations, and the model is not told a limit stopped it; run mur as root or delegate a cgroup v2 subtree with the memory controller", c.Path)})
	}
	return out
}

// splitJoined returns the errors an errors.Join holds, or err alone.
func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// harnessPromptFinding warns (W-HARNESS-004) when a harness would be sent a system prompt (the capsule's
// instructions, its skills, the plan guidance) but no argument of harness.command holds
// {instructions}, the only way a harness receives it.
func harnessPromptFinding(c *capsule.Capsule, memberName string) (Finding, bool) {
	for _, a := range c.Harness.Command {
		if strings.Contains(a, harness.PlaceholderInstructions) {
			return Finding{}, false
		}
	}
	var parts []string
	if strings.TrimSpace(c.Instructions) != "" {
		parts = append(parts, "the instructions")
	}
	if n := len(c.Skills); n > 0 {
		parts = append(parts, fmt.Sprintf("%d skill(s)", n))
	}
	if c.Capabilities.Plan.Submit {
		parts = append(parts, "the plan guidance (capabilities.plan.submit)")
	}
	if len(parts) == 0 {
		return Finding{}, false
	}
	return Finding{Code: CodeHarnessPrompt, Member: memberName, Message: fmt.Sprintf(
		"%s: no argument of harness.command holds %s, so the harness never receives the system prompt the runtime would send (%s); pass it to the harness's system-prompt flag, such as Claude Code's --append-system-prompt %q",
		c.Path, harness.PlaceholderInstructions, strings.Join(parts, ", "), harness.PlaceholderInstructions)}, true
}
