# newsflow application image: the `newsflow` CLI (poller and Bytewax flow).
# Python 3.12: bytewax 0.21.1 ships wheels for CPython <= 3.12 only.
FROM python:3.12-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY . /src
RUN pip install . \
    && useradd --create-home --uid 10001 newsflow \
    && mkdir -p /state /recovery \
    && chown newsflow /state /recovery

USER newsflow
WORKDIR /home/newsflow
# metrics and /healthz: 9400 newsflow run, 9401 newsflow poll
EXPOSE 9400 9401
ENTRYPOINT ["newsflow"]
CMD ["--help"]
