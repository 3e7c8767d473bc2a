package capsule

import (
	"testing"
	"time"
)

func TestNoticeMargin(t *testing.T) {
	zero, ten := 0, 10
	for _, tc := range []struct {
		deadline time.Duration
		secs     *int
		want     time.Duration
	}{
		{2 * time.Hour, nil, 5 * time.Minute},
		{10 * time.Minute, nil, time.Minute},
		{5 * time.Second, nil, time.Second},
		{2 * time.Hour, &ten, 10 * time.Second},
		{2 * time.Hour, &zero, 0},
	} {
		c := &Capsule{Deadline: tc.deadline}
		c.Lifecycle.DeadlineNoticeSecs = tc.secs
		if got := c.NoticeMargin(); got != tc.want {
			t.Errorf("deadline %s, deadline_notice_secs %v: margin %s, want %s", tc.deadline, tc.secs, got, tc.want)
		}
	}
}
