# trainop: `make run` trains the PyTorch DDP example locally; `make test` runs every test.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# the rank supervisor's Go (supervisor/): formatted as gofmt writes it, and vetted
GO_LINT = test -z "$$(gofmt -l supervisor)" && (cd supervisor && GOTOOLCHAIN=local go vet .)

.PHONY: run test lint crds venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip==25.3

venv: $(BIN)/python

## run: install trainop and PyTorch (PyPI's wheel, about 3 GB with its CUDA libraries), then
## run the embedded PyTorch DDP job locally (on the CPU)
run: venv
	$(BIN)/pip install -q --no-cache-dir -e '.[train]'
	$(BIN)/trainop run

## test: lint, type-check, then unit, integration (real kube-apiserver + etcd),
## conformance, differential (upstream's operator beside trainop), Kueue, e2e and real-node
## tests (a single-node cluster the tests start: see README, Testing), with the binaries
## hack/test-assets.sh builds (their kubectl first on PATH); hack/run-tests.sh runs the
## differential and Kueue suites beside the others
test: venv
	bash hack/system-deps.sh
	bash hack/node-deps.sh
	@# the Go builds (CPU) run while pip downloads PyTorch (network): a cold run's longest
	@# two steps side by side
	bash hack/test-assets.sh >.test-assets & assets=$$!; \
	$(BIN)/pip install -q --no-cache-dir -e '.[train,e2e,bench,dev]'; installed=$$?; \
	wait $$assets && [ $$installed -eq 0 ]
	KUBEBUILDER_ASSETS="$$(cat .test-assets)" && export KUBEBUILDER_ASSETS && \
	export PATH="$$KUBEBUILDER_ASSETS:$$PATH" && \
	$(BIN)/ruff check . && \
	$(BIN)/mypy && \
	$(GO_LINT) && \
	bash hack/run-tests.sh $(BIN)/python $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(GO_LINT)

## crds: remake the Kubernetes types' schemas (trainop/api/kubeschema.json, by controller-gen
## from k8s.io/api of the suites' release), then config/ from the API models (the CRDs,
## their list and the webhooks)
crds: venv
	KUBEBUILDER_ASSETS="$$(bash hack/test-assets.sh)" $(BIN)/python -m testbed.kubeschema
	$(BIN)/trainop crds --config config
