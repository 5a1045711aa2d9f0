// Command go-envtest times controller-runtime's envtest on the same binaries as
// pytest-envtest, so bench/ can report a ratio measured in one run on one machine.
//
// Usage: go-envtest -assets DIR -runs N   (prints one JSON object per run)
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

type run struct {
	StartSeconds float64 `json:"start_seconds"`
	StopSeconds  float64 `json:"stop_seconds"`
}

func main() {
	assets := flag.String("assets", os.Getenv("KUBEBUILDER_ASSETS"), "directory with kube-apiserver and etcd")
	runs := flag.Int("runs", 5, "number of start/stop cycles")
	flag.Parse()
	for i := 0; i < *runs; i++ {
		env := &envtest.Environment{BinaryAssetsDirectory: *assets}
		started := time.Now()
		if _, err := env.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "start:", err)
			os.Exit(1)
		}
		startSeconds := time.Since(started).Seconds()
		stopping := time.Now()
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop:", err)
			os.Exit(1)
		}
		out, _ := json.Marshal(run{startSeconds, time.Since(stopping).Seconds()})
		fmt.Println(string(out))
	}
}
