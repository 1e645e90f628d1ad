package opview_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/opview"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
)

// The page draws the fake run's figures in headless Chromium, the edge
// cases included (no watermark yet, a stream that ended), without a
// script error; examples/operator_test.go does it against a real run.
func TestPageDrawsEveryPart(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	require.NoError(t, err, "the page test needs Debian's chromium (make deps installs it)")
	f, pipe := newFakeRun(t)
	f.status.Streams = append(f.status.Streams, runtime.StreamStatus{Name: "ended", EventWatermark: opview.EndOfStream, SystemWatermark: opview.EndOfStream, Finished: true})
	pipe.Streams = append(pipe.Streams, spec.Stream{Name: "ended"})
	s, hs := newServer(t, f, pipe, nil)
	f.advance(time.Second)
	f.src.WithLabelValues("orders", "raw").Add(5)
	f.ptotal.WithLabelValues(runtime.WorkReplay, "orders").Set(10)
	f.pdone.WithLabelValues(runtime.WorkReplay, "orders").Set(4)
	s.Sample()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(allocCtx)
	defer cancelTab()
	require.NoError(t, chromedp.Do(tab, chromedp.Navigate(hs.URL+"/")))
	_, err = chromedp.Run(tab, chromedp.Poll[chromedp.Void](`Number(document.body.dataset.updates || 0) >= 1`,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(time.Minute)))
	require.NoError(t, err, "the page never rendered a snapshot")

	var got struct {
		Nodes       []string
		Streams     map[string]string
		Partitions  int
		Quarantine  string
		Tenants     map[string]string
		DeadLetters int
		Hold        string
		Progress    []string
		Owner       string
	}
	js, err := chromedp.Run(tab, chromedp.Evaluate[string](`JSON.stringify({
		Nodes: [...document.querySelectorAll('#graph [data-node-id]')].map(e => e.dataset.nodeId),
		Streams: Object.fromEntries([...document.querySelectorAll('#streams tr[data-stream]')].map(tr => [tr.dataset.stream, tr.querySelector('.ewm').textContent])),
		Partitions: document.querySelectorAll('#partitions tbody tr').length,
		Quarantine: document.querySelector('#quarantines td.reason').textContent,
		Tenants: Object.fromEntries([...document.querySelectorAll('#tenants tr[data-tenant]')].map(tr => [tr.dataset.tenant, tr.querySelector('.cpu-share').textContent])),
		DeadLetters: document.querySelectorAll('#dl-latest tbody tr').length,
		Hold: document.getElementById('hold').textContent,
		Progress: [...document.querySelectorAll('#progress tr[data-work]')].map(tr => tr.dataset.work + " " + tr.querySelector('.done').textContent + "/" + tr.querySelector('.total').textContent),
		Owner: document.querySelector('#partitions td.owner').textContent,
	})`))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(js), &got))
	require.Equal(t, []string{"source:orders", "computation:parse", "computation:score", "sink:out"}, got.Nodes)
	require.Equal(t, "none yet", got.Streams["scored"])
	require.Equal(t, "end", got.Streams["ended"])
	require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`, got.Streams["raw"])
	require.Equal(t, 3, got.Partitions)
	require.Equal(t, "guest trapped 3 times: unreachable", got.Quarantine)
	require.Equal(t, map[string]string{"operator": "0.0%", "acme": "0.0%"}, got.Tenants, "no worker time used")
	require.Equal(t, 1, got.DeadLetters)
	require.Contains(t, got.Hold, "stream raw")
	require.Equal(t, []string{"replay orders 4/10"}, got.Progress)
	require.Equal(t, opview.DefaultHostID(), got.Owner)
}
