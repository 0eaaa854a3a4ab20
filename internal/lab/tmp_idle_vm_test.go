//go:build !sqm_noautorate

package lab

import (
	"context"
	"testing"
	"time"

	"sqm/internal/config"
	"sqm/internal/testutil"
	"sqm/internal/trace"
)

func TestVMTmpIdle(t *testing.T) {
	testutil.RequireVM(t)
	tr, err := trace.ReadFile("testdata/autorate-step-8-2-8.steps")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	o := DefaultOptions()
	o.Link.DownBits, o.Link.UpBits = 8_000_000, 2_000_000
	o.Duration = 100 * time.Second
	o.Idle = 2 * time.Second
	ctl := Autorate().(*sqmAutorate)
	ctl.queue = func(q *config.Queue) {
		q.Autorate.UploadMin, q.Autorate.UploadMax = q.Upload, q.Upload
		q.Autorate.DownloadMin = 1000
	}
	rep, err := RunTrace(ctx, o, Traces{Down: tr, Controller: ctl, NoLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cpu %.2f", rep.Controller.CPUSeconds)
}
