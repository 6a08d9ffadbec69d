# accelboard: the web app image; the same image runs the Celery worker and beat (docker-compose.yml).
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=accelboard.settings \
    ACCELBOARD_PRODUCTION=1 \
    STATIC_ROOT=/app/staticfiles \
    MEDIA_ROOT=/data/media \
    ACCELBOARD_HOME=/data/home

WORKDIR /app
RUN groupadd --system --gid 10001 accelboard \
 && useradd --system --uid 10001 --gid accelboard --home-dir /data --shell /usr/sbin/nologin accelboard

# Dependencies first, so editing the code does not reinstall them: the versions of
# requirements.lock, and no extra (the embedded PostgreSQL and its broker transport are for
# `make demo`; production sets DATABASE_URL and CELERY_BROKER_URL).
COPY pyproject.toml requirements.lock ./
RUN mkdir -p accelboard && touch accelboard/__init__.py && pip install -c requirements.lock . && pip uninstall -y accelboard

COPY accelboard ./accelboard
COPY templates ./templates
COPY static ./static
COPY manage.py ./
# Editable: settings find templates/ and static/ beside the package (BASE_DIR), which a wheel
# install into site-packages would not carry. Dependencies are already in place.
RUN pip install --no-deps -e .

# collectstatic reads no database; production settings still demand these variables, so the
# build gives throwaway values that never reach the running container.
RUN ACCELBOARD_PRODUCTION=1 \
    SECRET_KEY=build-only-build-only-build-only-build-only-build-only-build-only \
    DATABASE_URL=postgresql://build@localhost/build \
    CELERY_BROKER_URL=redis://localhost:6379/0 \
    ALLOWED_HOSTS=localhost \
    python manage.py collectstatic --no-input --verbosity 0 \
 && mkdir -p /data/media /data/home /data/beat \
 && chown -R accelboard:accelboard /data

USER accelboard
VOLUME ["/data"]
EXPOSE 8000

# accelboard/gunicorn_conf.py sets the workers from the CPU count (2 x cores + 1; WEB_CONCURRENCY overrides),
# threads, timeouts and worker recycling; FORWARDED_ALLOW_IPS and GUNICORN_CMD_ARGS come from the env.
# The health probe must look like a real request: a host from ALLOWED_HOSTS and HTTPS as seen
# through the proxy (SECURE_PROXY_SSL), or Django answers 400 or redirects to https.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 CMD \
  python -c "import os,sys,urllib.request as u; h=os.environ.get('ALLOWED_HOSTS','localhost').split(',')[0].strip().lstrip('.'); h='localhost' if h in ('','*') else h; r=u.Request('http://127.0.0.1:8000/healthz', headers={'Host': h, 'X-Forwarded-Proto': 'https'}); sys.exit(0 if u.urlopen(r, timeout=4).status == 200 else 1)"

CMD ["gunicorn", "accelboard.wsgi", "--config", "python:accelboard.gunicorn_conf"]
