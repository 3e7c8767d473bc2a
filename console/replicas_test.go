package console

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/pgtest"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/server"
)

// gatedSolo is a member whose tasks wait until the file go appears in its capsule directory, then
// answer with their message.
const gatedSolo = `name: solo
script:
  command: [sh, -c, 'read -r line; while [ ! -e "$MUR_CAPSULE_DIR/go" ]; do sleep 0.01; done; echo "done: $line"']
`

// replicated is member solo run as three replicas, r1, r2 and r3, each a formation of its own (a
// process of its own in production: mur member) on one throwaway PostgreSQL database, with a console
// that reaches the member at r1's door, as it would reach one URL in front of the three.
type replicated struct {
	t       *testing.T
	dsn     string
	capsule string
	fs      []*server.Formation
	console *Console
	base    string
}

func startReplicated(t *testing.T) *replicated {
	t.Helper()
	dsn := pgtest.Start(t).NewDatabase(t)
	root := t.TempDir()
	rp := &replicated{t: t, dsn: dsn, capsule: filepath.Join(root, "solo")}
	os.MkdirAll(rp.capsule, 0o755)
	if err := os.WriteFile(filepath.Join(rp.capsule, "murmur.yaml"), []byte(gatedSolo), 0o644); err != nil {
		t.Fatal(err)
	}
	body := "formation: reps\nmembers:\n  - name: solo\n    capsule: ./solo\n    listen: '127.0.0.1:0'\n    replicas: 3\n    store: " + storeURL(t, dsn) + "\n"
	if err := os.WriteFile(filepath.Join(root, "roster.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	records := filepath.Join(root, "records")
	t.Cleanup(func() {
		rp.release()
		for _, f := range rp.fs {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			if err := f.Shutdown(ctx); err != nil {
				t.Errorf("replica shutdown: %v", err)
			}
			cancel()
		}
	})
	for i := range 3 {
		f, err := server.StartFormation(server.FormationConfig{Roster: r, Only: []string{"solo"}, DataDir: filepath.Join(root, "data"),
			RecordsRoot: records, Tokens: server.Tokens{Operator: testOperatorToken, Formation: "formation-token-for-tests"},
			MaxBody: server.DefaultMaxBody, Version: "test", Replica: "r" + strconv.Itoa(i+1), Lease: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		rp.fs = append(rp.fs, f)
	}
	rp.console, rp.base = startConsoleFor(t, r, map[string]string{"solo": rp.fs[0].Members[0].URL}, records)
	return rp
}

// storeURL is a test database's key=value dsn as the postgres:// URL a roster's store: takes.
func storeURL(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{"host": {cfg.Host}, "port": {strconv.Itoa(int(cfg.Port))}, "sslmode": {"disable"}}
	return (&url.URL{Scheme: "postgres", User: url.User(cfg.User), Path: "/" + cfg.Database, RawQuery: q.Encode()}).String()
}

func (rp *replicated) release() { os.WriteFile(filepath.Join(rp.capsule, "go"), nil, 0o644) }

// connect opens a connection to the member's database, behind its back.
func (rp *replicated) connect() *pgx.Conn {
	rp.t.Helper()
	c, err := pgx.Connect(context.Background(), rp.dsn)
	if err != nil {
		rp.t.Fatal(err)
	}
	rp.t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// send sends text to the member at r1's door and returns its task, without waiting for it.
func (rp *replicated) send(text string) string {
	rp.t.Helper()
	c := a2a.NewClient(rp.fs[0].Members[0].URL+"/a2a", testOperatorToken, nil)
	res, err := c.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: &a2a.Message{
		MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(text)}},
		Configuration: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil || res.Task == nil {
		rp.t.Fatalf("SendMessage %q: %v %+v", text, err, res)
	}
	return string(res.Task.ID)
}

// owners waits until each task of ids has an owner in the store, and returns them: which replica runs
// each, as the database says.
func (rp *replicated) owners(names ...string) map[string]string {
	rp.t.Helper()
	db := rp.connect()
	out := map[string]string{}
	waitFor(rp.t, "every task claimed by a replica", func() bool {
		for _, id := range names {
			var owner, state string
			if err := db.QueryRow(context.Background(), `SELECT owner, state FROM tasks WHERE id = $1`, id).Scan(&owner, &state); err != nil || owner == "" ||
				state != string(a2a.TaskStateWorking) {
				return false
			}
			out[id] = owner
		}
		return true
	})
	return out
}

// lapsedGhost writes the lease of a replica named ghost that lapses in a second, and holds its lease
// row locked until the test ends or the returned func is called: the live replicas, which reap a
// lapsed replica's row under FOR UPDATE SKIP LOCKED, skip it, so it stays listed, lapsed, while held.
func (rp *replicated) lapsedGhost() func() {
	rp.t.Helper()
	db := rp.connect()
	ctx := context.Background()
	now := time.Now()
	if _, err := db.Exec(ctx, `INSERT INTO replicas (name, started, lease_until, free) VALUES ('ghost', $1, $2, 0)`,
		now.Add(-time.Minute).UnixMilli(), now.Add(time.Second).UnixMilli()); err != nil {
		rp.t.Fatal(err)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		rp.t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT name FROM replicas WHERE name = 'ghost' FOR UPDATE`); err != nil {
		rp.t.Fatal(err)
	}
	done := false
	let := func() {
		if !done {
			done = true
			tx.Rollback(ctx)
		}
	}
	rp.t.Cleanup(let)
	return let
}

// replicaRow matches a replica's row on a member's page: its name and lease (live or lapsed).
var replicaRow = regexp.MustCompile(`<tr class="replica" data-replica="([^"]+)" data-lease="(live|lapsed)">`)

// taskRows maps each task row of a page to the replica it names ("" for none).
func taskRows(body string) map[string]string {
	out := map[string]string{}
	for _, row := range regexp.MustCompile(`(?s)<tr class="task" data-task="(tsk_[^"]+)".*?</tr>`).FindAllStringSubmatch(body, -1) {
		on := ""
		if m := regexp.MustCompile(`class="why task-replica" data-replica="([^"]+)"`).FindStringSubmatch(row[0]); m != nil {
			on = m[1]
		}
		out[row[1]] = on
	}
	return out
}

// replicasOf maps each replica a member's page lists to its lease.
func replicasOf(body string) map[string]string {
	out := map[string]string{}
	for _, m := range replicaRow.FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// The console shows a member run as replicas as its door's GET /replicas tells it: the member's page
// lists its three replicas, live, each with its lease and free places; each running task's row, and
// its page, name the replica that runs it, the one the database says owns it (the console reaches only
// r1's door); the formation page counts the replicas. A replica whose lease lapsed is shown lapsed
// until a live one reaps it, then it is gone; a task that ended names no replica.
func TestReplicasOnTheConsole(t *testing.T) {
	rp := startReplicated(t)
	a, b := rp.send("first"), rp.send("second")
	owners := rp.owners(a, b)
	br := newBrowser(t, rp.base)
	br.login(rp.console)

	var page string
	waitFor(t, "the member's page to list r1, r2 and r3 live and name the replica of each task", func() bool {
		_, page = br.get("/members/solo")
		rows, reps := taskRows(page), replicasOf(page)
		return reps["r1"] == "live" && reps["r2"] == "live" && reps["r3"] == "live" && len(reps) == 3 &&
			rows[a] == owners[a] && rows[b] == owners[b]
	})
	for _, want := range []string{`id="replicas"`, "3 replica(s), 3 live", "Lease until", "Free places"} {
		if !strings.Contains(page, want) {
			t.Errorf("the member's page lacks %q:\n%s", want, page)
		}
	}
	for _, id := range []string{a, b} {
		code, body := br.get("/members/solo/tasks/" + id)
		if want := `id="task-replica" data-replica="` + owners[id] + `"`; code != http.StatusOK || !strings.Contains(body, want) ||
			!strings.Contains(body, "runs on replica <strong>"+owners[id]+"</strong>") {
			t.Errorf("task %s's page: %d, want it to name replica %s (%s):\n%s", id, code, owners[id], want, body)
		}
	}
	if _, body := br.get("/"); !strings.Contains(body, "3 replica(s), 3 live") {
		t.Errorf("the formation page does not count the replicas:\n%s", body)
	}

	// A replica whose lease lapsed: listed lapsed, not counted live; once reaped, gone.
	let := rp.lapsedGhost()
	waitFor(t, "the ghost replica shown lapsed", func() bool {
		_, page = br.get("/members/solo")
		return replicasOf(page)["ghost"] == "lapsed"
	})
	if !strings.Contains(page, "4 replica(s), 3 live") {
		t.Errorf("with a lapsed replica the member's page does not say 4 replicas, 3 live:\n%s", page)
	}
	let()
	waitFor(t, "the ghost replica reaped and gone from the page", func() bool {
		_, page = br.get("/members/solo")
		reps := replicasOf(page)
		_, ghost := reps["ghost"]
		return !ghost && len(reps) == 3
	})

	// Ended tasks run on no replica.
	rp.release()
	waitFor(t, "both tasks completed, naming no replica", func() bool {
		_, page = br.get("/members/solo")
		rows := taskRows(page)
		return strings.Count(page, `data-state="completed"`) == 2 && rows[a] == "" && rows[b] == ""
	})
	if _, body := br.get("/members/solo/tasks/" + a); strings.Contains(body, "task-replica") {
		t.Errorf("a completed task's page still names a replica:\n%s", body)
	}
}

// A member of one process shows no replicas: its door answers GET /replicas 404, and neither its page
// nor the formation page speaks of replicas.
func TestReplicasNotShownForOneProcess(t *testing.T) {
	h := startHello(t, false)
	h.send("worker", "2 + 3")
	b := newBrowser(t, h.base)
	b.login(h.console)
	waitFor(t, "worker's door read", func() bool {
		w := h.console.byName["worker"]
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.replicasRead
	})
	for _, p := range []string{"/", "/members/worker"} {
		if _, body := b.get(p); strings.Contains(body, "replica") {
			t.Errorf("%s of a formation of one-process members speaks of replicas:\n%s", p, body)
		}
	}
	w := h.console.byName["worker"].view()
	if w.Replicated || w.ReplicasErr != "" || len(w.Replicas) != 0 {
		t.Errorf("worker's view: replicated %v, error %q, %d replicas; want none", w.Replicated, w.ReplicasErr, len(w.Replicas))
	}
}

// In Chromium: the member's page, open while tasks are sent to the member, shows its replicas and,
// live, which replica runs each task, then each task complete with no replica, without a reload; at
// 390 px wide it does not scroll sideways.
func TestBrowserReplicas(t *testing.T) {
	chromiumPath(t)
	rp := startReplicated(t)
	ctx := newChrome(t)
	dir := shotDir(t)
	do(t, ctx, "log in and open the member's page",
		chromedp.Navigate(rp.console.LoginURL(rp.base)),
		chromedp.WaitVisible(`tr.member[data-member="solo"]`),
		chromedp.Navigate(rp.base+"/members/solo"),
		chromedp.WaitVisible(`#replicas tr.replica[data-replica="r1"]`),
	)
	poll(t, ctx, "the live stream connected", `document.querySelector('#live').classList.contains('ok')`)
	poll(t, ctx, "three live replicas", `document.querySelectorAll('#replicas tr.replica[data-lease="live"]').length === 3`)
	do(t, ctx, "mark the page", chromedp.Evaluate[chromedp.Void](`window.__sameLoad = true`))
	a, b := rp.send("first"), rp.send("second")
	owners := rp.owners(a, b)
	for _, id := range []string{a, b} {
		poll(t, ctx, "task "+id+"'s row names replica "+owners[id],
			`(document.querySelector('tr.task[data-task="`+id+`"] .task-replica') || {dataset: {}}).dataset.replica === "`+owners[id]+`" && window.__sameLoad === true`)
	}
	if got := text(t, ctx, "replicas table", `#replicas`); !strings.Contains(got, "live") || !strings.Contains(got, "r2") {
		t.Errorf("the replicas table reads %q", got)
	}
	shot(t, ctx, dir, "member-replicas.png")
	do(t, ctx, "open a task's page", chromedp.Navigate(rp.base+"/members/solo/tasks/"+a), chromedp.WaitVisible(`#task-replica`))
	if got := text(t, ctx, "the task's replica", `#task-replica`); !strings.Contains(got, owners[a]) {
		t.Errorf("the task's page says %q; want replica %s", got, owners[a])
	}
	do(t, ctx, "back to the member's page", chromedp.Navigate(rp.base+"/members/solo"), chromedp.WaitVisible(`#replicas`))
	poll(t, ctx, "the live stream connected", `document.querySelector('#live').classList.contains('ok')`)
	do(t, ctx, "mark the page", chromedp.Evaluate[chromedp.Void](`window.__sameLoad = true`))
	rp.release()
	poll(t, ctx, "both tasks completed, naming no replica, without a reload",
		`document.querySelectorAll('tr.task[data-state="completed"]').length === 2 && !document.querySelector('tr.task .task-replica') && window.__sameLoad === true`)
	do(t, ctx, "phone size", chromedp.EmulateViewport(390, 844), chromedp.Navigate(rp.base+"/members/solo"), chromedp.WaitVisible(`#replicas`))
	if w := get(t, ctx, "page width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 392 {
		t.Errorf("at 390 px wide the member's page is %d px wide: it scrolls sideways", w)
	}
	shot(t, ctx, dir, "member-replicas-phone.png")
}
