// Command order-keeper is a tiny Kubernetes operator written against the REST API with Go's
// standard library only (no client-go): the framework's fault tests run it as a compiled,
// non-Python operator, the way a controller-runtime manager is run, and it builds offline in
// seconds.
//
// Every tick (100 ms) it lists the ConfigMaps labelled order=open in one namespace. For each
// order X it makes sure that a ConfigMap X-receipt exists and that the order is labelled
// order=done. The two writes cannot be made atomic, so their order decides what a process
// killed between them leaves behind:
//
//   - safe (the default): create the receipt, then mark the order done. Killed in between, the
//     order is still open; the next instance lists it again, gets 409 AlreadyExists for the
//     receipt (the instance before made it) and marks the order done.
//   - --unsafe: mark the order done, then create the receipt. Killed in between, the order is
//     done, so no instance lists it again: its receipt is never made. This is the reconcile bug
//     that fault exploration (a crash after a write) must find.
//
// --heartbeat 150ms makes it also write a ConfigMap order-keeper-heartbeat that often (its
// data.beat counts up), as operators renew a Lease or stamp a status: the number of writes
// before any order's changes with every run, so "the k-th write" is another request each time
// and only a fault point named by its request meets the same one.
//
// --billing URL makes it charge each order before its receipt: POST URL/charge/<order>, with
// Go's default HTTP transport (which honours HTTP_PROXY, as operators' clients of their
// workloads do); an answer other than 2xx, or none, leaves the order open for the next tick.
// The framework's services fixture serves such a URL by its Service name
// (http://billing.<namespace>.svc.cluster.local:8080).
//
// Usage:
//
//	order-keeper [--kubeconfig PATH] [--namespace NAME] [--unsafe] [--interval 100ms]
//	             [--heartbeat 150ms] [--billing URL]
//
// --kubeconfig defaults to $KUBECONFIG and --namespace to $WATCH_NAMESPACE (the framework's
// run_operator sets KUBECONFIG and replaces "{kubeconfig}" in the arguments). The kubeconfig is
// read once, at start: after a crash fault the framework starts a fresh process with a fresh
// kubeconfig (a new certificate), so there is nothing to reload.
//
// It logs one line per action to stderr in Go's log format with microseconds, which the
// framework's timeline report reads times from. An API error (any answer but 2xx, and 409
// AlreadyExists for a receipt) is logged and tried again on the next tick: it never exits for
// one. SIGTERM or SIGINT ends it with exit code 0; a bad flag or kubeconfig with exit code 2.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const (
	orderLabel    = "order"
	openOrders    = orderLabel + "=open"
	done          = "done"
	receiptSuffix = "-receipt"
	userAgent     = "order-keeper/1 (pytest-envtest example)"
)

func main() {
	// The date, the time to the microsecond, then the prefix: a line the framework dates by
	// itself ("2026/12/01 22:05:46.154321 order-keeper: ...").
	log.SetFlags(log.LstdFlags | log.Lmicroseconds | log.Lmsgprefix)
	log.SetPrefix("order-keeper: ")

	kubeconfigPath := flag.String("kubeconfig", os.Getenv("KUBECONFIG"),
		"the kubeconfig to connect with (default $KUBECONFIG)")
	namespace := flag.String("namespace", os.Getenv("WATCH_NAMESPACE"),
		"the namespace whose orders to keep (default $WATCH_NAMESPACE)")
	unsafe := flag.Bool("unsafe", false,
		"mark an order done before creating its receipt (a crash in between loses the receipt)")
	interval := flag.Duration("interval", 100*time.Millisecond, "how often to list the orders")
	heartbeat := flag.Duration("heartbeat", 0,
		"also write the ConfigMap order-keeper-heartbeat this often (0: never)")
	billing := flag.String("billing", "",
		"charge each order with POST <URL>/charge/<order> before its receipt (\"\": never)")
	flag.Parse()
	if *kubeconfigPath == "" || *namespace == "" || *interval <= 0 || flag.NArg() > 0 {
		log.Printf("usage: order-keeper --kubeconfig PATH --namespace NAME [--unsafe] " +
			"[--interval 100ms] (or $KUBECONFIG and $WATCH_NAMESPACE)")
		os.Exit(2)
	}
	api, err := newClient(*kubeconfigPath)
	if err != nil {
		log.Printf("cannot connect: %v", err)
		os.Exit(2)
	}

	// SIGTERM is how the framework (and a kubelet) asks an operator to stop: a clean exit 0.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	keeper := &keeper{api: api, namespace: *namespace, unsafe: *unsafe,
		billing: strings.TrimRight(*billing, "/")}
	mode := "safe (receipt first)"
	if *unsafe {
		mode = "unsafe (order done first)"
	}
	log.Printf("started (pid %d): server %s, namespace %s, mode %s, every %s",
		os.Getpid(), api.server, *namespace, mode, *interval)

	if *heartbeat > 0 {
		go keeper.beat(ctx, *heartbeat)
	}
	ticker := time.NewTicker(*interval)
	defer ticker.Stop()
	for {
		keeper.tick(ctx)
		select {
		case <-ctx.Done():
			log.Printf("stopping: %v", context.Cause(ctx))
			return
		case <-ticker.C:
		}
	}
}

// keeper reconciles the orders of one namespace.
type keeper struct {
	api       *client
	namespace string
	unsafe    bool
	billing   string
}

// beat writes the heartbeat ConfigMap every period until ctx ends (create once, then update
// its counter): writes whose number before an order's varies from run to run.
func (k *keeper) beat(ctx context.Context, period time.Duration) {
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for n := 1; ; n++ {
		body := map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "order-keeper-heartbeat"},
			"data":     map[string]string{"beat": fmt.Sprint(n)},
		}
		path := k.configMaps() + "/order-keeper-heartbeat?fieldManager=order-keeper"
		if err := k.api.do(ctx, http.MethodPatch, path, "application/apply-patch+yaml", body,
			nil); err != nil && ctx.Err() == nil {
			log.Printf("heartbeat: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// tick lists the open orders and reconciles each; an error is logged and the order is tried
// again on the next tick (it is still open, unless --unsafe lost it).
func (k *keeper) tick(ctx context.Context) {
	orders, err := k.listOpenOrders(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Printf("list orders: %v (trying again next tick)", err)
		}
		return
	}
	if len(orders) > 0 { // an empty list every 100 ms is not worth a line
		log.Printf("listed %d open order(s): %s", len(orders), strings.Join(orders, ", "))
	}
	for _, name := range orders {
		if ctx.Err() != nil {
			return
		}
		if err := k.reconcile(ctx, name); err != nil && ctx.Err() == nil {
			log.Printf("order %s: %v (trying again next tick)", name, err)
		}
	}
}

// reconcile makes the order's two writes, in the order the mode says.
func (k *keeper) reconcile(ctx context.Context, order string) error {
	if err := k.charge(ctx, order); err != nil {
		return err
	}
	if k.unsafe {
		// The bug: once the order is done nothing lists it again, so a crash (or an error)
		// before the receipt exists leaves it without one for ever.
		if err := k.markDone(ctx, order); err != nil {
			return err
		}
		return k.createReceipt(ctx, order)
	}
	// Safe: while the receipt is missing the order stays open, so it is listed and tried again.
	if err := k.createReceipt(ctx, order); err != nil {
		return err
	}
	return k.markDone(ctx, order)
}

// charge asks the billing service to charge the order (when --billing is given): any answer
// but 2xx, or none, is an error.
func (k *keeper) charge(ctx context.Context, order string) error {
	if k.billing == "" {
		return nil
	}
	target := k.billing + "/charge/" + url.PathEscape(order)
	request, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
	if err != nil {
		return fmt.Errorf("charge: %w", err)
	}
	response, err := (&http.Client{Timeout: 5 * time.Second}).Do(request)
	if err != nil {
		return fmt.Errorf("charge: %w", err)
	}
	defer response.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(response.Body, 200))
	if response.StatusCode/100 != 2 {
		return fmt.Errorf("charge: POST %s answered %s: %s", target, response.Status,
			strings.TrimSpace(string(answer)))
	}
	log.Printf("charged order %s: %s", order, strings.TrimSpace(string(answer)))
	return nil
}

func (k *keeper) configMaps() string {
	return "/api/v1/namespaces/" + url.PathEscape(k.namespace) + "/configmaps"
}

func (k *keeper) listOpenOrders(ctx context.Context) ([]string, error) {
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	query := "?labelSelector=" + url.QueryEscape(openOrders)
	if err := k.api.do(ctx, http.MethodGet, k.configMaps()+query, "", nil, &list); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list.Items))
	for _, item := range list.Items {
		names = append(names, item.Metadata.Name)
	}
	return names, nil
}

// createReceipt creates X-receipt; AlreadyExists means an instance before this one made it
// (and was killed before it marked the order done): that is success too.
func (k *keeper) createReceipt(ctx context.Context, order string) error {
	receipt := order + receiptSuffix
	body := map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": receipt},
		"data":       map[string]string{"order": order},
	}
	err := k.api.do(ctx, http.MethodPost, k.configMaps(), "application/json", body, nil)
	var failed *apiError
	switch {
	case err == nil:
		log.Printf("created receipt %s for order %s", receipt, order)
		return nil
	case errors.As(err, &failed) && failed.code == http.StatusConflict &&
		failed.reason == "AlreadyExists": // not any 409: a Conflict is an error to retry
		log.Printf("receipt %s exists already (made before a restart)", receipt)
		return nil
	default:
		return fmt.Errorf("create receipt %s: %w", receipt, err)
	}
}

// markDone sets the order's label with a JSON merge patch (no resourceVersion: the label is
// the only thing it changes, whatever else changed meanwhile).
func (k *keeper) markDone(ctx context.Context, order string) error {
	patch := map[string]any{"metadata": map[string]any{
		"labels": map[string]string{orderLabel: done}}}
	path := k.configMaps() + "/" + url.PathEscape(order)
	if err := k.api.do(ctx, http.MethodPatch, path, "application/merge-patch+json", patch,
		nil); err != nil {
		return fmt.Errorf("mark order done: %w", err)
	}
	log.Printf("marked order %s done", order)
	return nil
}

// -- the API client --------------------------------------------------------------------------

// client speaks JSON to one apiserver over TLS, as the kubeconfig's user.
type client struct {
	server string
	http   *http.Client
}

// apiError is an answer other than 2xx, with the reason of the Status the apiserver sends
// (AlreadyExists, Conflict, InternalError ...).
type apiError struct {
	code    int
	reason  string
	message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.code, e.reason, e.message)
}

func (c *client) do(ctx context.Context, method, path, contentType string, body, into any,
) error {
	var reader io.Reader
	if body != nil {
		encoded, err := json.Marshal(body)
		if err != nil {
			return err
		}
		reader = bytes.NewReader(encoded)
	}
	request, err := http.NewRequestWithContext(ctx, method, c.server+path, reader)
	if err != nil {
		return err
	}
	request.Header.Set("Accept", "application/json")
	request.Header.Set("User-Agent", userAgent)
	if contentType != "" {
		request.Header.Set("Content-Type", contentType)
	}
	response, err := c.http.Do(request)
	if err != nil {
		return err
	}
	defer response.Body.Close()
	data, err := io.ReadAll(response.Body)
	if err != nil {
		return err
	}
	if response.StatusCode < 200 || response.StatusCode > 299 {
		var status struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(data, &status) // not a Status (a proxy's page): the code says enough
		return &apiError{response.StatusCode, status.Reason, status.Message}
	}
	if into != nil {
		return json.Unmarshal(data, into)
	}
	return nil
}

// newClient reads the kubeconfig and makes a client that verifies the server with its CA and
// presents the user's client certificate.
func newClient(path string) (*client, error) {
	config, err := readKubeconfig(path)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(config.ca) {
		return nil, fmt.Errorf("%s: no PEM certificate in the certificate authority", path)
	}
	pair, err := tls.X509KeyPair(config.cert, config.key)
	if err != nil {
		return nil, fmt.Errorf("%s: the client certificate and key: %w", path, err)
	}
	transport := &http.Transport{
		// No Proxy: the apiserver (or the framework's fault proxy) is reached directly.
		TLSClientConfig: &tls.Config{
			RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}
	return &client{
		server: strings.TrimRight(config.server, "/"),
		// A request the apiserver never answers must not hang the loop for ever.
		http: &http.Client{Transport: transport, Timeout: 10 * time.Second},
	}, nil
}

// kubeconfig is what a client-certificate kubeconfig gives: the server, its CA, the user's
// certificate and key (all PEM).
type kubeconfig struct {
	server        string
	ca, cert, key []byte
}

// readKubeconfig reads the few fields it needs from a kubeconfig with one cluster and one
// user, line by line, without a YAML library (the standard library has none). It handles
// what the framework writes (PyYAML's safe_dump: "key: value" lines, lists as "- "), embedded
// base64 data (*-data) or file paths (relative to the kubeconfig's directory), and quoted
// values. A file with several clusters or users is refused, not guessed at.
func readKubeconfig(path string) (*kubeconfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	wanted := map[string]bool{
		"server": true, "certificate-authority": true, "certificate-authority-data": true,
		"client-certificate": true, "client-certificate-data": true,
		"client-key": true, "client-key-data": true,
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "- ")
		key, value, found := strings.Cut(line, ":")
		if !found || !wanted[key] {
			continue
		}
		if _, seen := fields[key]; seen {
			return nil, fmt.Errorf("%s: %q appears twice; this reader takes one cluster and "+
				"one user", path, key)
		}
		fields[key] = unquote(strings.TrimSpace(value))
	}
	config := &kubeconfig{server: fields["server"]}
	if config.server == "" {
		return nil, fmt.Errorf("%s: no server", path)
	}
	directory := filepath.Dir(path)
	for _, part := range []struct {
		name string
		into *[]byte
	}{
		{"certificate-authority", &config.ca},
		{"client-certificate", &config.cert},
		{"client-key", &config.key},
	} {
		if encoded, ok := fields[part.name+"-data"]; ok {
			*part.into, err = base64.StdEncoding.DecodeString(encoded)
		} else if file, ok := fields[part.name]; ok {
			if !filepath.IsAbs(file) {
				file = filepath.Join(directory, file)
			}
			*part.into, err = os.ReadFile(file)
		} else {
			err = errors.New("missing")
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, part.name, err)
		}
	}
	return config, nil
}

// unquote removes the quotes YAML may put around a scalar (a path with a space, a name with
// a colon), undoing the one escape each style needs for a quote inside.
func unquote(value string) string {
	if len(value) >= 2 {
		switch {
		case value[0] == '\'' && value[len(value)-1] == '\'':
			return strings.ReplaceAll(value[1:len(value)-1], "''", "'")
		case value[0] == '"' && value[len(value)-1] == '"':
			return strings.ReplaceAll(value[1:len(value)-1], `\"`, `"`)
		}
	}
	return value
}
