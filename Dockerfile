# The mur image: static binaries on scratch, so it builds where no image can be pulled.
#
#   CGO_ENABLED=0 go build -trimpath -o dist/mur ./cmd/mur
#   cp /bin/busybox dist/busybox                    # a static busybox: Debian's busybox-static
#   cp /etc/ssl/certs/ca-certificates.crt dist/     # for drivers that call HTTPS APIs
#   docker build -t mur .
#
# With a registry and no Go toolchain, deploy/Dockerfile.source builds the same image from source; the
# two files are the same from the marker line on (a test in cmd/mur keeps them so).
#
# busybox supplies /bin/sh and the usual commands, for script capsules (a shell script needs /bin/sh)
# and capabilities.shell.allow. The process runs as uid 65532; /data (task stores, tokens, workdirs,
# records) is a volume owned by that user, so a fresh named volume is writable by it.
FROM scratch
COPY dist/busybox /bin/busybox
COPY dist/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY dist/mur /usr/local/bin/mur
# --- the same in Dockerfile and deploy/Dockerfile.source from here on ---
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN ["/bin/sh", "-c", "mkdir -p /data /tmp && chown 65532:65532 /data && chmod 1777 /tmp && echo 'mur:x:65532:65532:mur:/data:/bin/false' >/etc/passwd && echo 'mur:x:65532:' >/etc/group"]
LABEL org.opencontainers.image.title="mur" org.opencontainers.image.source="https://github.com/murmur-run/murmur" run.murmur.image="mur"
ENV PATH=/usr/local/bin:/usr/bin:/bin MUR_DATA_DIR=/data MUR_RECORDS_DIR=/data/records HOME=/data
USER 65532:65532
WORKDIR /data
VOLUME ["/data"]
ENTRYPOINT ["/usr/local/bin/mur"]
CMD ["--help"]
