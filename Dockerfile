# syntax=docker/dockerfile:1
# One image for the web app and, built with EXTRAS="[worker]", for the GPU worker.

# Node lives only in this stage: it installs the pinned htmx and KaTeX into static/vendor/.
FROM node:20-slim AS vendor
WORKDIR /src
COPY package.json package-lock.json ./
COPY scripts/install_vendor.sh scripts/
RUN bash scripts/install_vendor.sh

FROM python:3.11-slim
# "" for the web app, "[worker]" for the worker (torch and transformers).
ARG EXTRAS=""
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /srv/steplabel
COPY . .
COPY --from=vendor /src/static/vendor static/vendor
# Editable, so that app/ finds templates/, static/, alembic.ini and migrations/ beside it
# here rather than looking for them in site-packages.
RUN --mount=type=cache,target=/root/.cache/pip pip install -e ".${EXTRAS}"
# /srv/steplabel is root's: the app's own files go where its user may write. The session
# key is made there on first start unless STEPLABEL_SECRET_KEY is set (docker-compose.yml
# keeps the folder in a volume, so that a new container keeps everyone logged in).
RUN useradd --system --create-home steplabel \
    && mkdir -p /data/checkpoints /data/secret \
    && chown steplabel /data/checkpoints /data/secret
ENV STEPLABEL_SECRET_KEY_FILE=/data/secret/steplabel-secret.key
USER steplabel
EXPOSE 8000
CMD ["uvicorn", "app.main:app", "--no-proxy-headers", "--host", "0.0.0.0", "--port", "8000"]
