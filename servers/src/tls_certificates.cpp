#include "lockstep/servers/tls_certificates.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "lockstep/core/error.h"

namespace lockstep {
namespace {

struct KeyFree {
    void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
    void operator()(X509* c) const { X509_free(c); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;

[[noreturn]] void fail(const std::string& what) {
    throw ConfigError("make_tls_certificates", what);
}

Key new_key() {
    Key key(EVP_EC_gen("P-256"));
    if (!key) fail("generating a P-256 key failed");
    return key;
}

void add_extension(X509* cert, X509* issuer, int nid, const char* value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    if (ext == nullptr) fail("building a certificate extension failed");
    const int ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    if (ok != 1) fail("adding a certificate extension failed");
}

struct Validity {
    long from_seconds;  // relative to now
    long to_seconds;
};
constexpr Validity kCurrent{-3600, 24 * 3600};
constexpr Validity kExpired{-2 * 24 * 3600, -24 * 3600};

// Signs `subject_key`'s certificate with `issuer_key`; issuer == nullptr makes it self-signed.
Cert make_cert(const std::string& common_name, EVP_PKEY* subject_key, X509* issuer, EVP_PKEY* issuer_key,
               long serial, Validity validity, const char* alt_names, bool is_ca) {
    Cert cert(X509_new());
    if (!cert) fail("allocating a certificate failed");
    X509_set_version(cert.get(), 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), validity.from_seconds);
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), validity.to_seconds);
    X509_set_pubkey(cert.get(), subject_key);
    X509_NAME* name = X509_get_subject_name(cert.get());
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("lockstep tests"), -1,
                               -1, 0);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1, 0);
    X509* signer = issuer != nullptr ? issuer : cert.get();
    X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
    if (is_ca) {
        add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
        add_extension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
        add_extension(cert.get(), signer, NID_basic_constraints, "CA:FALSE");
        add_extension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth");
    }
    add_extension(cert.get(), signer, NID_subject_key_identifier, "hash");
    if (alt_names != nullptr) add_extension(cert.get(), signer, NID_subject_alt_name, alt_names);
    if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) fail("signing a certificate failed");
    return cert;
}

struct FileClose {
    void operator()(std::FILE* f) const { std::fclose(f); }
};

std::unique_ptr<std::FILE, FileClose> open_for_writing(const std::string& path) {
    std::unique_ptr<std::FILE, FileClose> f(std::fopen(path.c_str(), "w"));
    if (!f) fail("cannot write " + path);
    return f;
}

void write_cert(const std::string& path, X509* cert) {
    auto f = open_for_writing(path);
    if (PEM_write_X509(f.get(), cert) != 1) fail("writing " + path + " failed");
}

void write_key(const std::string& path, EVP_PKEY* key) {
    {
        auto f = open_for_writing(path);
        if (PEM_write_PrivateKey(f.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
            fail("writing " + path + " failed");
    }
    // Servers refuse a key file others can read.
    std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

constexpr const char* kLocalNames = "DNS:localhost,IP:127.0.0.1";

}  // namespace

TlsCertificates make_tls_certificates(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) fail("cannot create " + dir + ": " + ec.message());
    TlsCertificates out;
    out.dir = dir;
    const auto path = [&](const char* file) { return (std::filesystem::path(dir) / file).string(); };

    Key ca_key = new_key();
    Cert ca = make_cert("lockstep test CA", ca_key.get(), nullptr, ca_key.get(), 1, kCurrent, nullptr, true);
    out.ca_file = path("ca.pem");
    write_cert(out.ca_file, ca.get());

    Key foreign_ca_key = new_key();
    Cert foreign_ca = make_cert("lockstep foreign CA", foreign_ca_key.get(), nullptr, foreign_ca_key.get(), 2,
                                kCurrent, nullptr, true);
    out.foreign_ca_file = path("foreign-ca.pem");
    write_cert(out.foreign_ca_file, foreign_ca.get());

    struct Leaf {
        const char* stem;
        const char* common_name;
        const char* alt_names;
        Validity validity;
        bool foreign;
        std::string* cert_path;
        std::string* key_path;
    };
    const Leaf leaves[] = {
        {"server", "localhost", kLocalNames, kCurrent, false, &out.server_cert, &out.server_key},
        {"client", "lockstep test client", nullptr, kCurrent, false, &out.client_cert, &out.client_key},
        {"expired", "localhost", kLocalNames, kExpired, false, &out.expired_cert, &out.expired_key},
        {"wrong-host", "wrong-host.invalid", "DNS:wrong-host.invalid", kCurrent, false, &out.wrong_host_cert,
         &out.wrong_host_key},
        {"foreign", "localhost", kLocalNames, kCurrent, true, &out.foreign_cert, &out.foreign_key},
    };
    long serial = 10;
    for (const Leaf& leaf : leaves) {
        Key key = new_key();
        X509* issuer = leaf.foreign ? foreign_ca.get() : ca.get();
        EVP_PKEY* issuer_key = leaf.foreign ? foreign_ca_key.get() : ca_key.get();
        Cert cert = make_cert(leaf.common_name, key.get(), issuer, issuer_key, serial++, leaf.validity,
                              leaf.alt_names, false);
        *leaf.cert_path = path((std::string(leaf.stem) + ".pem").c_str());
        *leaf.key_path = path((std::string(leaf.stem) + "-key.pem").c_str());
        write_cert(*leaf.cert_path, cert.get());
        write_key(*leaf.key_path, key.get());
    }
    return out;
}

}  // namespace lockstep
