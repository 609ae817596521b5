# Batch Size Lab, for a class: `docker compose up` (see docs/deploy.md).
# Two stages: build a venv with scripts/install.sh, then copy it into a slim runtime image that
# runs as a non-root user. TORCH_REQUIREMENT pins torch (empty: pyproject.toml's range);
# TORCH_INDEX_URL picks the build: empty brings the CUDA wheels (they carry their own CUDA
# libraries); for a CPU-only image pass --build-arg TORCH_INDEX_URL=cpu (PyTorch's CPU wheels).
# EXTRAS=cluster adds PostgreSQL's driver, for replicas sharing one run store (docs/deploy.md).
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
ARG TORCH_REQUIREMENT=
ARG TORCH_INDEX_URL=
ARG EXTRAS=
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bsdemo ./bsdemo
COPY scripts/install.sh ./scripts/install.sh
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --quiet --no-cache-dir --upgrade pip \
 && scripts/install.sh /opt/venv/bin/pip "$TORCH_REQUIREMENT" app "$TORCH_INDEX_URL" "$EXTRAS"

FROM python:${PYTHON_VERSION}-slim
# 1 = download MNIST, Fashion-MNIST and CIFAR-10 into the image (checksums verified)
ARG FETCH_DATASETS=1
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin lab \
 && mkdir -p /data /opt/datasets && chown lab:lab /data /opt/datasets
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY --chown=lab:lab app.py ./
COPY --chown=lab:lab pages ./pages
COPY --chown=lab:lab .streamlit ./.streamlit
COPY --chown=lab:lab assets ./assets
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    BSDEMO_DATA_DIR=/data \
    BSDEMO_DATASETS_DIR=/opt/datasets
USER lab
RUN if [ "$FETCH_DATASETS" = "1" ]; then python -m bsdemo datasets fetch; fi
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=40s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4).read() != b'ok')"]
# `streamlit run` with the scheduler and the metrics started first (bsdemo/ui/launch.py)
CMD ["python", "-m", "bsdemo.ui.launch", "app.py", "--server.port=8501", "--server.address=0.0.0.0"]
