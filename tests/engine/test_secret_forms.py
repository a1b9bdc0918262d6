"""Forms of credential that stand without a credential word beside them, or apart from their name:
passwords given to commands, URLs and connection strings, infrastructure-as-code defaults, container
arguments and environments, accounts' passwords, literals named by a comment, headers of any scheme;
and the look-alikes of each form left alone. Every sentence and value here was written for these
tests (none comes from tests/data/credentials), each value made up at random in its form's shape."""

from __future__ import annotations

import time

import pytest

from cairn.privacy import secret_blocks, secret_rules, secret_values
from cairn.privacy.scrub import scrub


@pytest.mark.parametrize(("text", "value"), [
    # passwords given to commands
    ("mariadb -u backup -pVq3!xLm82Tz -e 'show databases'", "Vq3!xLm82Tz"),
    ("sqlcmd -S db01 -U sa -P 'Yv7#Lq2pXm9' -Q 'select @@version'", "Yv7#Lq2pXm9"),
    ('ldapsearch -x -H ldap://dc1 -D "cn=admin,dc=acme,dc=io" -w Pk8Lm3Qz7x -b dc=acme,dc=io', "Pk8Lm3Qz7x"),
    ("htpasswd -b -c /etc/nginx/.htpasswd alice Rv8Lq2mXk7", "Rv8Lq2mXk7"),
    ("net user svc_sql Kq9!vLm2Tz /add /domain", "Kq9!vLm2Tz"),
    (r"net use Y: \\nas01\media /user:HOME\kodi Wm4!zQ8kLp /persistent:yes", "Wm4!zQ8kLp"),
    ("rabbitmqctl add_user deployer Hz7kQ2mLx9", "Hz7kQ2mLx9"),
    ("echo 'ubuntu:Fz8qK2mLv7' | chpasswd", "Fz8qK2mLv7"),
    ("mc alias set minio http://localhost:9000 minioadmin Tq7LmZ2kXv9Rp4Nc", "Tq7LmZ2kXv9Rp4Nc"),
    ("echo 'Nb4kT9qLm2Xz' | docker login --username ci --password-stdin registry.acme.io", "Nb4kT9qLm2Xz"),
    ("redis-server --requirepass Wz8qK2mLx7 --port 6380", "Wz8qK2mLx7"),
    ('command: ["redis-server", "--requirepass", "Xm7Kq2zLv9"]', "Xm7Kq2zLv9"),
    ("openssl enc -aes-256-cbc -in db.sql -out db.enc -k Qz7!mK2xLv9", "Qz7!mK2xLv9"),
    ("7z a -pKq8mL2zXv7 backup.7z ./data", "Kq8mL2zXv7"),
    ("PGPASSWORD='#Lq9mK2zXv!' pg_restore -d app dump.bin", "#Lq9mK2zXv!"),
    ("ALTER USER scott IDENTIFIED BY Tg7kQ2mLx9;", "Tg7kQ2mLx9"),
    # headers of any scheme, URLs' query strings, webhook URLs
    ("-H 'Authorization: ApiToken 3e8f1a9c-7b2d-4c6e-8a1f-9d3b5c7e2a4f'", "3e8f1a9c-7b2d-4c6e-8a1f-9d3b5c7e2a4f"),
    ("-H 'Authorization: SharedKey acmestore:Lq8mK2zXv7Tp4Nc9Rb3Yw6Hd1Jg5='", "Lq8mK2zXv7Tp4Nc9Rb3Yw6Hd1Jg5="),
    ("curl 'https://api.weatherco.io/v1/forecast?city=Oslo&apikey=9f8e7d6c5b4a39281706f5e4d3c2b1a0'",
     "9f8e7d6c5b4a39281706f5e4d3c2b1a0"),
    ("ws://localhost:8080/socket?access_token=Kq8mL2zXv7Tp4Rn9Wb3Yc6", "Kq8mL2zXv7Tp4Rn9Wb3Yc6"),
    ("curl -d '{\"text\":\"hi\"}' https://chat.acme.io/hooks/k3m9x7q2p5w8z1c4v6b0n2j7ht", "k3m9x7q2p5w8z1c4v6b0n2j7ht"),
    # infrastructure as code: a name on one line, its value on another
    ('variable "rds_master_password" {\n  type    = string\n  default = "Kv7!mQz2Lp"\n}', "Kv7!mQz2Lp"),
    ('variable "api_token" {\n  default   = "c8f2a9e1b7d34f6a9e0c2b5d8a1f7e3c"\n  sensitive = true\n}',
     "c8f2a9e1b7d34f6a9e0c2b5d8a1f7e3c"),
    ("    - name: MINIO_ROOT_PASSWORD\n      value: Tz9kQ2mLx7Vp", "Tz9kQ2mLx7Vp"),
    ('{"name": "DJANGO_SECRET_KEY", "value": "q7#mK2z!Lx9vT4p@Rn8bY3c"}', "q7#mK2z!Lx9vT4p@Rn8bY3c"),
    ("args:\n  - --api-token\n  - Jq7mK2zLx9Vt4Rp8", "Jq7mK2zLx9Vt4Rp8"),
    # an account's password, no credential word
    ("the grafana login is ops / Kq7!mZ2xLp until we wire SSO", "Kq7!mZ2xLp"),
    ("the elastic superuser is elastic / Kz9-mQ2xLv7 on the new cluster", "Kz9-mQ2xLv7"),
    ("| service | user | password |\n|---|---|---|\n| grafana | admin | Xv8!kL2mQz |", "Xv8!kL2mQz"),
    ("default creds on the appliance are admin:Vq7mK2zXL9pT", "Vq7mK2zXL9pT"),
    ("Grafana: https://grafana.acme.io (admin / `Zm8#kQ2xLv`)", "Zm8#kQ2xLv"),
    ("| Service | Key |\n|---|---|\n| Mailer | Mv8kQ2zLx7Tp4Rn9Wb3Y |", "Mv8kQ2zLx7Tp4Rn9Wb3Y"),
    # a literal named by its comment; vendor formats
    ("mailer = Mailer('9a8b7c6d5e4f30211203a4b5c6d7e8f9')  # secret key from the dashboard",
     "9a8b7c6d5e4f30211203a4b5c6d7e8f9"),
    ("geo = Geocoder('4d7b9e1a3c5f8e2d6b0a9c4e7f1d3b5a')  // server key, keep out of the app bundle",
     "4d7b9e1a3c5f8e2d6b0a9c4e7f1d3b5a"),
    ("plaid item: access-sandbox-0c2e4a6f-8b1d-4f3e-9a5c-7b3d5f7a9c2e", "0c2e4a6f-8b1d-4f3e-9a5c-7b3d5f7a9c2e"),
    ("new Ably.Rest('Xq7mK2.z9LvT4:Rp8Nc3Yb6Hd1Jg5Ks0Aa2Bb4Cc6Dd8Ee0Ff2Gg4Hh6I')",
     "Rp8Nc3Yb6Hd1Jg5Ks0Aa2Bb4Cc6Dd8Ee0Ff2Gg4Hh6I"),
    ("the erlang cookie for the cluster is QXKLMZPWRTVBNCYUHGFD", "QXKLMZPWRTVBNCYUHGFD"),
    ("Authorization: Token token=\"Hq8mK2zLx7Tp4Nc9Rb3Yw6\"", "Hq8mK2zLx7Tp4Nc9Rb3Yw6"),
    ("Proxy-Authorization: Basic c3ZjLXByb3h5OlpxOG1LMnhMdjdUcA==", "c3ZjLXByb3h5OlpxOG1LMnhMdjdUcA=="),
    ("SNMP community string: Xk8mQ2zLv7p", "Xk8mQ2zLv7p"),
    ("pre-shared key for the IPsec tunnel: Wq8kL2mZx7Tp4Rn9", "Wq8kL2mZx7Tp4Rn9"),
    ("BitLocker recovery key 401839-112266-587730-094512-638847-220561-775104-369028",
     "401839-112266-587730-094512-638847-220561-775104-369028"),
    ("export hmacKey=1c5cf5f1dfd9c9b9f89900715dc1ac1a", "1c5cf5f1dfd9c9b9f89900715dc1ac1a"),  # hex, 3.24 bits
    # generated values shorter than 20 characters, introduced as a password, a token or a secret
    ("the API token is q7tw2mzk9x4p", "q7tw2mzk9x4p"),
    ("secret: 6b1f9e3a7c2d8e40", "6b1f9e3a7c2d8e40"),
    ("the password is kGmTqXwRbZ", "kGmTqXwRbZ"),
    ("mysql -u app -pvqzkmwtrbx shop", "vqzkmwtrbx"),
    ("Das Passwort lautet 8c3e1f7a-2b9d-4c6e-a0f1-5d7b3e9c2a4f", "8c3e1f7a-2b9d-4c6e-a0f1-5d7b3e9c2a4f"),
    ("the opsgenie integration key is 5d1f3b7e-9a2c-4e6f-8b0d-2c4e6a8f0b1d", "5d1f3b7e-9a2c-4e6f-8b0d-2c4e6a8f0b1d"),
])
def test_credentials_without_their_word_beside_them_are_redacted(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    "mysql -h db -u app -p app_prod",
    'sshpass -p "$SSHPASS" ssh deploy@host',
    "the sshpass -p flag leaks the password into ps output; use -f",
    "echo \"$CR_PAT\" | docker login ghcr.io -u acme --password-stdin",
    'redis-server --requirepass "$REDIS_PASSWORD"',
    'command: ["redis-server", "--appendonly", "yes"]',
    'Option("--forward-token", help="Send the token to the sandbox.")',
    "htpasswd -c /etc/nginx/.htpasswd alice",
    "the output column identified by colV becomes a vertical header",
    "gpg --passwd user-id changes the passphrase of a key",
    "pulumi config set --secret dbPassword  # reads from stdin",
    "the token is refresh_token_v2 in the new schema",
    "secret: kubeconfig2024 is the name of the mounted file",
    "the GPG key is 9f4e39fd264583b1 on keys.openpgp.org",
    "kubectl delete secret regcred-9f8k2",
    "| Service | Owner |\n|---|---|\n| Mailer | @dana |",
    "| Key | Description |\n|---|---|\n| cache_ttl | seconds |\n| f3a9c2e7b1d84f60a5e9c3b7d2f1a8e4 | the old hash |",
    'let token = env::var("TOKEN").expect("TOKEN not set");',
    "login ok user=jdoe token=[masked] ip=10.0.4.12",
    "the secret app-tls-8f7c2d is mounted at /etc/tls",
    'Error: secret "app-config-5g8h9k2t7m" not found',
    "BitLocker recovery keys are escrowed to Entra ID",
    "net user guest /active:no",
    "openssl enc -aes-256-cbc -in db.sql -out db.enc -pass file:./pw",
    "gpg --recv-keys 0x3A1C9F2E7B4D8C60 from keys.openpgp.org",
    "-H 'Authorization: Bearer $API_TOKEN'",
    'WWW-Authenticate: Basic realm="staging", charset="UTF-8"',
    "Authorization: the middleware validates the session first",
    "curl 'https://api.acme.io/v1/items?page=2&limit=50&sort=desc'",
    "password reset links use ?token= with a 30 minute expiry",
    'variable "db_password" {\n  type      = string\n  sensitive = true\n}',
    'variable "region" {\n  type    = string\n  default = "eu-west-1"\n}',
    "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: pg\n        key: password",
    "env:\n  - name: API_TOKEN\n    value: \"{{ .Values.apiToken }}\"",
    "args:\n  - --token-file\n  - /var/run/secrets/token",
    "| env | user | region |\n| staging | admin | eu-west-1 |",
    "docker pull postgres:16.4-alpine3.20",
    "go to root/Documents/Reports2024 for the files",
    "const cacheKey = '7d3f9a1c5e8b2d4f6a0c9e1b3d5f7a9c'; // cache key for the rendered page",
    "SITE_KEY = '6LdQ8mK2zLx7Tp4Rn9Wb3Yc6Hd1Jg5Ks0Aa2Bb4'  # reCAPTCHA site key, public",
    "const id = 'b7e9c1f3a5d2e8f0c4a6b9d1e3f5a7c9'  # request id from the failing call, not a secret",
    'MYSQL_ALLOW_EMPTY_PASSWORD: "yes"',
    'tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")',
    '{"keys":[{"kty":"EC","crv":"P-256","kid":"k1","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"}]}',
    "login ok user=jdoe session=[REDACTED] ip=10.0.4.12 port=51822",
    "the dummy secret 1x0000000000000000000000000000000AA passes every check",
    "an error message names API_KEY and SECRET_ACCESS_KEY_ID as required",
    "GET /v1/events?limit=50&next_page_token=Zq8mK2xLv7Tp",
    'Authorization: Digest username="alice", realm="api", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", uri="/"',
    "admin:x:1000:1000:Admin,,,:/home/admin:/bin/bash",
    "root:x:0:0:root:/root:/bin/bash",
    "MIXPANEL_TOKEN=3c9e1a7f5b2d8e4c6a0f9b1d3e5a7c2f  # project token, public",
    "the idempotency key is 5d1f3b7e-9a2c-4e6f-8b0d-2c4e6a8f0b1d",
])
def test_the_look_alikes_of_those_forms_are_left_alone(text):
    assert scrub(text).text == text


def test_a_setting_name_holds_a_credential_by_its_last_words():
    for name in ("DB_PASSWORD", "api_token", "requirepass", "postgresPassword", "SECRET_KEY", "signingKey"):
        assert secret_blocks.secret_setting(name), name
    for name in ("DB_PASSWORD_FILE", "ssh_key_name", "password_length", "LOG_LEVEL", "kms_key_id"):
        assert not secret_blocks.secret_setting(name), name


def test_block_findings_point_at_the_value_in_the_whole_text():
    text = 'variable "admin_pass" {\n  description = "VM admin"\n  default     = "Hq4#mZ8kLx2p"\n}'
    [(kind, (start, end))] = secret_blocks.block_findings(text)
    assert text[start:end] == "Hq4#mZ8kLx2p" and kind == "Credential In Prose"


def test_a_value_is_introduced_by_one_list_of_words_for_both_tests():
    for word in ("lautet", "jest", "adalah", "equals"):
        assert secret_rules._GIVEN.search(f" {word} ") and secret_rules._INTRODUCED.search(f" {word} ")
    # Given right after the word, but not introduced as it.
    assert secret_rules._GIVEN.search(" for staging ") and not secret_rules._INTRODUCED.search(" for staging ")


def test_placeholders_are_told_from_random_values_that_hold_a_run():
    assert secret_values.placeholder("ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX")
    assert secret_values.placeholder("sk_live_xxx")
    assert secret_rules.look_alike("1x0000000000000000000000000000000AA", "the dummy secret ")
    assert not secret_values.placeholder("0RYTq4K+95HvqJH24Ss5fbQWjoXXXb2RvuMgc6UNaA==")
    assert not secret_values.placeholder("QXKLMZPWRTVBNCYUHGFD")
    assert secret_values.placeholder("SECRET_ACCESS_KEY_ID")


def test_a_fragment_group_is_widened_to_the_match_outside_the_faithful_mode():
    rule = secret_rules.Rule(id="fragment", pattern=r"hook/([a-z0-9]{4}-){3}([a-z0-9]{12})/[A-Za-z0-9]{20}")
    text = "see hook/ab12-cd34-ef56-0123456789ab/Zq8mK2xLv7Tp4Rn9Wb3Y now"
    [finding] = secret_rules.RuleSet([rule]).run(rule, text)
    assert text[slice(*finding.span)] == text[4:-4]
    for ruleset in (secret_rules.RuleSet([rule], composite=True), secret_rules.RuleSet([rule], faithful=True)):
        [faithful] = ruleset.run(rule, text)
        assert text[slice(*faithful.span)] == "ef56-"


# -- holdout5's causes: a value announced on the line above, and what is not a credential -------------------

@pytest.mark.parametrize(("text", "value"), [
    # a value alone under the line that announces it (tool output, a YAML block scalar, a continued command)
    ("Generated a one-time password for the root account:\n\n  Hv4mQ9-zLk2Tx7Rw\n", "Hv4mQ9-zLk2Tx7Rw"),
    ("cache:\n  password: >-\n    Wq8.zN3_kLm5Vt", "Wq8.zN3_kLm5Vt"),
    ("vault write auth/approle/login secret_id \\\n    5b7d9f1a3c5e7092b4d6f8a0c2e4f6a8 \\\n    role_id=web",
     "5b7d9f1a3c5e7092b4d6f8a0c2e4f6a8"),
    # a password that starts like a path is not one
    ('db_root_password = "~Rz4kWq8_mTv2Lp"', "~Rz4kWq8_mTv2Lp"),
    ('variable "root_pass" {\n  default = ".Gm5!xQ2wLk8Pz"\n}', ".Gm5!xQ2wLk8Pz"),
    # OpenVPN's shared static key, and a Korean short word for a password
    ("<secret>\n-----BEGIN OpenVPN Static key V1-----\n5a0c8e2f4b6d1a3c5e7f9b0d2a4c6e8f\n"
     "-----END OpenVPN Static key V1-----\n</secret>", "5a0c8e2f4b6d1a3c5e7f9b0d2a4c6e8f"),
    ("서버 비번: Tz6!kW9qLm3X", "Tz6!kW9qLm3X"),
    # commands: -u USER -p SECRET, net use's password before /user:, --key KEY; a Go DSN; JSON inside a string
    ('influx -u admin -p Tq7vLm2pXz9 -execute "show databases"', "Tq7vLm2pXz9"),
    (r"net use \\nas\backup Vk8#qLm2Xz /user:HOME\alice", "Vk8#qLm2Xz"),
    ("restic-decrypt --key Lm4qZ8wXk2Tv9Rn5Pb7Yc3Hd6Jg1Ks0A= --in x", "Lm4qZ8wXk2Tv9Rn5Pb7Yc3Hd6Jg1Ks0A="),
    ('dsn := "svc:Hq4mZ8kLx2p@tcp(db.internal:3306)/orders"', "Hq4mZ8kLx2p"),
    ("$db = new PDO('pgsql:host=db;dbname=shop', 'shop', 'Kz9-mQ2xLv7');", "Kz9-mQ2xLv7"),
    ('{"msg":"login failed","body":"{\\"user\\":\\"ops\\",\\"secret\\":\\"Zr8vK2mQ9xT4Lp\\"}"}', "Zr8vK2mQ9xT4Lp"),
    # the forms next to the look-alikes below stay credentials
    ("-H 'Authorization: Basic Y2ktcnVubmVyOnpXOHFLM21Mdjc='", "Y2ktcnVubmVyOnpXOHFLM21Mdjc="),  # ci-runner:zW8qK3mLv7
    ('STATSIG_SECRET=secret-Lm4qZ8wXk2Tv9Rn5Pb7Yc3Hd6Jg1', "secret-Lm4qZ8wXk2Tv9Rn5Pb7Yc3Hd6Jg1"),
    ("MAPS_API_KEY=AIzaLm4qZ8wXk2Tv9Rn5Pb7Yc3Hd6Jg1Ks0Aq", "AIzaLm4qZ8wXk2Tv9Rn5Pb7Yc3Hd6Jg1Ks0Aq"),
    ('recovery phrase: "lunar copper basket violin meadow pilot frost ember canyon tiger humble orbit"',
     "lunar copper basket violin meadow pilot frost ember canyon tiger humble orbit"),
])
def test_holdout5_forms_are_redacted(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    # placeholders and stand-in words
    "export MINIO_ROOT_PASSWORD=localdev",
    'os.environ["AWS_SECRET_ACCESS_KEY"] = "fake"',
    "amqp://yourusername:yourpassword@localhost:5672/",
    "-H 'Authorization: Basic Z3Vlc3Q6Z3Vlc3Q='  # guest:guest, the broker's default",
    # password hashes, ciphertext, public keys
    'hashed_admin_password = "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$Qm9ndXNIYXNoVmFsdWVGb3JUZXN0"',
    '{"password": "pbkdf2_sha256$720000$Rk2pQz8mWx$Vb7Lm2kQz9Xw4Tp8Rn3Yc6Hd1Jg5Ks0Aa2Bb4Cc6Dd="}',
    "app.datasource.password=ENC(Zk2mQ9xLv7Tp4Rn8Wb3Yc6Hd1Jg5)",
    "verify_key=MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=",
    # a published development key and mnemonic, a Firebase app's config, client-side keys, ids, cache keys
    "anvil: private key 0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a (publicly known)",
    'seed: "zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo wrong"',
    'const app = initializeApp({\n  apiKey: "AIzaQw3eR5tY7uI9oP1aS3dF5gH7jK9lZ2xC4vB",\n  projectId: "shop-demo"\n});',
    "flags.init({ clientKey: 'client-Wq8zN3kLm5Vt7Rx2Pb4Yc6Hd9' })",
    "oidc: { userPoolWebClientId: '7h2k9m4q1r8s3t6u5v0w2x4y6z', identityPoolId: 'eu-central-1:3f1c2b7a' }",
    "Cache saved with key: macOS-gradle-9c3e5a7b1d2f4e6a8c0b9d7f5e3a1c2b4d6f8e0a",
    # the word on the line above names something else than the value
    "Password policy:\n\nminimum-length-14",
    "The reCAPTCHA site key:\n6LdRx3kpAAAAAMq8Wz2L7nN4pTt9VwXyZ1aB",
    # the command forms' look-alikes: a port, a database, a key id, a key file, a placeholder DSN
    "docker run -u 1000 -p 8080:80 nginx",
    "new PDO('mysql:host=db;dbname=app', 'app', getenv('DB_PASS'))",
    "Encrypted password:\n\nU2FsdGVkX1+Wq8zN3kLm5Vt7Rx2Pb4Yc6Hd9Jg1Ks0A",
    "mysql -u root -p mydb < dump.sql",
    "gpg --key 3AA5C34371567BD2 --sign file",
    "curl --key client.key --cert client.crt https://x.test",
    'db, err := sql.Open("mysql", "user:password@tcp(127.0.0.1:3306)/app")',
])
def test_holdout5_look_alikes_are_left_alone(text):
    assert scrub(text).text == text


def test_placeholder_words_hashes_and_public_keys_are_told_apart():
    assert secret_values.lower_case_word("testing") and not secret_values.lower_case_word("qzvxkwpmtr")
    assert secret_values.placeholder("mypassword") and not secret_values.placeholder("Kq7!vLm2Tz")
    # base64 of "user:user" (a default) against base64 of "ops:Kq7vLm2Tz8"
    assert secret_values.placeholder("dXNlcjp1c2Vy") and not secret_values.placeholder("b3BzOktxN3ZMbTJUejg=")
    line = 'x = "$2b$12$Wq8zN3kLm5Vt7Rx2Pb4Yc.6Hd9Jg1Ks0Aa2Bb4Cc6Dd8Ee0Ff2Gg4"'
    assert secret_values.hashed(line, 5, len(line) - 1)
    # a public key (SubjectPublicKeyInfo) and a private one (PKCS#8) of the same algorithm
    assert secret_values.der_public_key("MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=")
    assert not secret_values.der_public_key("MC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC")


# -- holdout6's causes: credentials given by their place, words for a password, what is public ----------------

@pytest.mark.parametrize(("text", "value"), [
    # a password after a user name among a call's arguments; a signing call's literal key
    ('$conn = mysqli_connect("db.internal", "shop_rw", "Qv7mK2zLx9Tp", "shop");', "Qv7mK2zLx9Tp"),
    ('conn = pymysql.connect("10.0.3.7", "reporter", "Hz8!kLm2Qx", "metrics")', "Hz8!kLm2Qx"),
    ('Session s = jsch.getSession("deploy", "build.acme.io"); ds.setup("jdbc:pg://db/x", "ops", "Wq8zN3kLm5Vt")',
     "Wq8zN3kLm5Vt"),
    ('sequelize = new Sequelize("shop", "shop_app", "Lm4qZ8wXk2Tv", { dialect: "mysql" })', "Lm4qZ8wXk2Tv"),
    ("const t = jwt.sign({ sub: id }, 'Rk9vQ2mXz7LpT4nW8bYc', { expiresIn: '1h' })", "Rk9vQ2mXz7LpT4nW8bYc"),
    ('mac = hmac.new(b"Tq7LmZ2kXv9Rp4Nc", body, hashlib.sha256)', "Tq7LmZ2kXv9Rp4Nc"),
    # the same in commands: a user option then a password option, a comma, a positional credential
    ("mosquitto_sub -h mqtt.lan -u panel -P Zk4mQ9xLv2Tp -t 'house/#'", "Zk4mQ9xLv2Tp"),
    ("lftp -u backup,Hq4mZ8kLx2pW sftp://nas.lan", "Hq4mZ8kLx2pW"),
    ("poetry config http-basic.internal deployer Xk8mQ2zLv7pRt4Wn", "Xk8mQ2zLv7pRt4Wn"),
    ("bitcoin-cli importprivkey LMASi45ub7Qe4ZE36UT5G6cU4ud8Fhhe4deS4F3cw9KTAb8dLcuk \"hot\" false",
     "LMASi45ub7Qe4ZE36UT5G6cU4ud8Fhhe4deS4F3cw9KTAb8dLcuk"),
    ("[smtp.fastmail.com]:465 alerts@acme.io:qzvxkwpmtrbnyhgd", "qzvxkwpmtrbnyhgd"),
    ("gpg --batch --passphrase 'copper lantern meadow frost' -c notes.txt", "copper lantern meadow frost"),
    ("tool sync --target prod --x-key Zq8mK2xLv7Tp4Rn9Wb3Yc6", "Zq8mK2xLv7Tp4Rn9Wb3Yc6"),  # a fragment of a word
    ("cli upload -s Wq8zN3kLm5Vt7Rx2Pb4Yc6 ./dist", "Wq8zN3kLm5Vt7Rx2Pb4Yc6"),  # an opaque one-letter option
    ("php -r \"echo env('APP_SALT', 'Vq7mK2zXL9pTw4Rn8b');\"", "Vq7mK2zXL9pTw4Rn8b"),
    # webhook URLs: the path after the hook, the key in its query, a path segment named key
    ("curl -X POST https://open.larksuite.com/open-apis/bot/v2/hook/5e2a9c1f-7b3d-4e8a-9c6f-1d2b3a4c5e6f",
     "5e2a9c1f-7b3d-4e8a-9c6f-1d2b3a4c5e6f"),
    ("POST https://hooks.zapier.com/hooks/catch/4417206/b7k2mq9/", "b7k2mq9"),
    ("https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=7c3e9a1f-5b2d-4f6e-8a0c-9d1b3e5f7a2c",
     "7c3e9a1f-5b2d-4f6e-8a0c-9d1b3e5f7a2c"),
    ("https://maker.ifttt.com/trigger/door_open/with/key/bK7mQ2zLx9Tp4Rn8Wc3Yd", "bK7mQ2zLx9Tp4Rn8Wc3Yd"),
    # across lines: expect's answer to a password prompt, a value under a user line, what a command printed
    ('spawn sftp ops@files\nexpect "Password:"\nsend "Kq7!mZ2xLp\\r"', "Kq7!mZ2xLp"),
    ("VPN login\nusuario: contabilidad\nWm4zQ8kLp2Tx", "Wm4zQ8kLp2Tx"),
    ("$ gh auth token\ngho_Lm4qZ8wXk2Tv9Rn5Pb7Yc3Hd6Jg1Ks0Aq9", "gho_Lm4qZ8wXk2Tv9Rn5Pb7Yc3Hd6Jg1Ks0Aq9"),
    # private keys in other forms than PEM
    ("<RSAKeyValue><P>3q8mK2zLx7Tp4Rn9Wb3Yc6Hd1Jg5Ks0Aa2Bb4Cc6Dd8=</P></RSAKeyValue>",
     "3q8mK2zLx7Tp4Rn9Wb3Yc6Hd1Jg5Ks0Aa2Bb4Cc6Dd8="),
    ("nats user seed SAAKQ7ZMW3XLR5TPV2NYB6CHD4JGK8SEA2BF4CG6DH8EJ2FK4GL6HM8IN",
     "SAAKQ7ZMW3XLR5TPV2NYB6CHD4JGK8SEA2BF4CG6DH8EJ2FK4GL6HM8IN"),
    # config names and the word for a password in other languages
    ("[domain/lab]\nldap_default_authtok = Tz9kQ2mLx7Vp", "Tz9kQ2mLx7Vp"),
    ("mail.smtp.password=wxqz pmvk trnb lhgd", "wxqz pmvk trnb lhgd"),
    ("lykilorðið fyrir póstinn er Hv4mQ9zLk2Tx", "Hv4mQ9zLk2Tx"),
    ("kata laluan pelayan ialah Qz7mK2xLv9Tp", "Qz7mK2xLv9Tp"),
    ("பயனர் கடவுச்சொல்: Xq8!vLm2Tz", "Xq8!vLm2Tz"),
    ("Cyfrinair y gweinydd: Rv8Lq2mXk7Tp", "Rv8Lq2mXk7Tp"),  # Welsh, from the same list
    ("mật khẩu ví lạnh: orbit canyon velvet ember pilot", "orbit canyon velvet ember pilot"),
])
def test_holdout6_forms_are_redacted(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    # calls: no literal password, a word, an algorithm's name, arguments that are not a login
    'new mysqli("localhost", "app", getenv("DB_PASS"), "shop");',
    "const t = jwt.sign(payload, process.env.JWT_SECRET, { algorithm: 'HS256' })",
    "jwt.decode(token, key, algorithms=['HS256'])",
    'mac = hmac.new(b"webhook", body, hashlib.sha256)',
    'logger.info("user %s logged in from %s", "alice", "10.0.0.4")',
    # commands: references, ports, a word for a password, ids as option values
    'mosquitto_pub -u sensor -P "$MQTT_PASS" -t t -m 1',
    "lftp -u anonymous,guest ftp.example.org",
    "bundle config --local gems.contribsys.com $SIDEKIQ_CREDENTIALS",
    "gpg --passphrase-file ~/.config/pw -c notes.txt",
    "aws s3api get-object --bucket b --key k --version-id Lm4qZ8wXk2Tv9Rn5Pb7Yc3Hd6 out.bin",
    "gdrive download --folder 1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms",
    "aws s3api list-objects-v2 --bucket b --continuation-token 1Qx8mK2zLv7Tp4Rn9Wb3Yc6Hd",
    "git clone git@github.com:acme/api.git",
    "ssh -p 2222 admin@files.acme.io:2222",
    # webhook URLs without a secret in them
    "see https://api.github.com/repos/acme/app/hooks/41827730/deliveries",
    "docs: https://docs.acme.io/webhooks/v2/payloads",
    # across lines: a reference sent, a user line then prose, a command's output that is an id
    'expect "password:"\nsend "$env(DB_PASS)\\r"',
    "user: alice\nsee you at the standup",
    "$ docker run -d -e POSTGRES_PASSWORD -p 5432:5432 postgres\n"
    "7f3e9a1c5b2d8e4f6a0c9b1d3e5f7a2c4b6d8e0f1a3c5e7b9d2f4a6c8e0b1d3f",
    "password: same as the staging one",
    # public keys and ids, prose about a key's format, spec samples, code as a value
    "the script pasted -----BEGIN OPENSSH PRIVATE KEY----- into the wrong field, nothing after it",
    "SecretId: AKIDz8krbsJ5yKBZQpn74WFkmLPx3gnPhESA",
    "PUSHER_KEY_PUBLIC=8f2c4a6e1b3d5f7a9c0e",
    'Razorpay({ key: "rzp_test_Kq7mZ2xLvT4pWn", amount: 4900 })',
    "per RFC 7636 the example code_verifier is dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
    "smtp_password: Rails.application.credentials.dig(:mail, :password)",
])
def test_holdout6_look_alikes_are_left_alone(text):
    assert scrub(text).text == text


def test_the_words_for_a_password_come_from_one_list():
    from cairn.privacy import secret_words

    assert len(secret_words.PASSWORD_WORDS) >= 70 and "kata laluan" in secret_words.PASSWORD_WORDS
    for word in ("lykilorðið", "salasõnaga", "passwords", "gronidło"):
        assert secret_rules.WORD.search(word), word
    assert not secret_rules.WORD.search("sandwich")


def test_a_generated_token_is_told_from_encoded_data_and_ids():
    assert secret_values.generated_token("Zq8mK2xLv7Tp4Rn9Wb3Yc6")
    for value in ("dGhpcyBpcyBqdXN0IHRleHQgaW4gYmFzZTY0",  # base64 of text
                  "eyJhbGciOiJIUzI1NiJ9",  # a JWT header
                  "3f9a2c1e7b5d4f608a9c2e1b3d5f7a9c",  # hex
                  "userAccountBalanceReport2024",  # words
                  "cus_Lm4qZ8wXk2Tv9Rn5Pb7Y"):  # an object id
        assert not secret_values.generated_token(value), value


@pytest.mark.parametrize(("text", "value"), [
    ('server.login("alerts@acme.io", "wxqz pmvk trnb lhgd")', "wxqz pmvk trnb lhgd"),
    ('auth.signInWithEmailAndPassword(auth, "qa@acme.io", "Hq4#mZ8kLx2p")', "Hq4#mZ8kLx2p"),
    ("$ ngrok config add-authtoken 2Qx8mK2zLv7Tp4Rn9Wb3Yc6Hd1Jg5", "2Qx8mK2zLv7Tp4Rn9Wb3Yc6Hd1Jg5"),
])
def test_positional_forms_in_more_places(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    "see https://github.com/acme/hooks/commit/3f9a2c1e7b5d9a0c",
    "https://github.com/acme/app/tree/main/hooks/precommit2",
    "password reset: sends email link twice",
    "aws ec2 run-instances --key-name Kq7mZ2xLv9Tp4Wn8bYc3 --count 1",
    "gh run rerun --job Kq7mZ2xLv9Tp4Wn8bYc3",  # an option named for a resource takes its id
    "docker run -e GITHUB_SHA=3f9a2c1e7b5d4f608a9c2e1b3d5f7a9c -e RUN_ID=Kq7mZ2xLv9Tp4Wn8bYc3 app",
    "NEXT_PUBLIC_ALGOLIA_SEARCH_KEY=Lm4qZ8wXk2Tv9Rn5Pb7Yc3Hd6Jg1",
])
def test_look_alikes_of_the_positional_forms_in_more_places(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    ("Heslo k serveru: Wq8;zN3kL,m5Vt (uživatel ops)", "Wq8;zN3kL,m5Vt"),  # a password holding ";" and ","
    ("contents of the replica set's keyfile:\nZq8mK2xLv7Tp4Rn9Wb3Yc6Hd1Jg5Ks0Aa2Bb4Cc6Dd8Ee0Ff2Gg4Hh6Ii8",
     "Zq8mK2xLv7Tp4Rn9Wb3Yc6Hd1Jg5Ks0Aa2Bb4Cc6Dd8Ee0Ff2Gg4Hh6Ii8"),
])
def test_punctuated_passwords_and_key_files(text, value):
    assert value not in scrub(text).text


def test_a_value_cut_at_its_comma_is_still_tried():
    text = "rclone ls :s3,access_key_id=K1,secret_access_key=Lm4qZ8wXk2Tv9Rn5Pb7Yc3Hd6Jg1Ks0A,endpoint=http://x"
    assert "Lm4qZ8wXk2Tv9Rn5Pb7Yc3Hd6Jg1Ks0A" not in scrub(text).text
    prose = "the key list: alpha,beta,gamma,delta for the cache"
    assert scrub(prose).text == prose


@pytest.mark.parametrize("text", [
    'candidates = [shutil.which(n) for n in ("python3.13", "python3.12", "python3.11")]',
    'ssh.connect("bastion.acme.io", "deploy", key_filename="~/.ssh/id_ed25519")',
])
def test_a_tuple_and_a_keyword_argument_are_no_call_password(text):
    assert scrub(text).text == text


# -- holdout7's causes (branch secrets6): sentences written for each cause, none taken from a split ------------
@pytest.mark.parametrize(("text", "value"), [
    # a URL's password holding a raw "@" (parsers take the last "@" before the host)
    ("MONGO_URI=mongodb://reporter:Tq9@vZ#2mLx@mongo-3.db.acme.io:27017/stats", "Tq9@vZ#2mLx"),
    ("amqp://worker:p@ss!Kq72z@rabbit.acme.io:5672/", "p@ss!Kq72z"),
    # the second literal of a call whose result is named a client or a connection
    ("smsClient = vonage('ab12cd34', 'Rv8Lq2mXk7Tp4Nc9Wb3Yz6Hd', {region: 'eu'})", "Rv8Lq2mXk7Tp4Nc9Wb3Yz6Hd"),
    ("$conn = open_link('svc_report', 'Hz7!kQ2mLx9v');", "Hz7!kQ2mLx9v"),
    # a password of digits under a name that says password
    ("docker run -e MEMCACHED_PASSWORD=50718263 bitnami/memcached", "50718263"),
    ("mqtt:\n  brokerPassword: '92047361'", "92047361"),
    # a generated key in quotes that starts with "%" (Django's alphabet holds % ^ $ @ ...)
    ("DJANGO_SECRET_KEY='%w8k^z2!qv$7m@x0p3r_t9&l4n6b+c1d5f=g8h2j0k7'", "%w8k^z2!qv$7m@x0p3r_t9&l4n6b+c1d5f=g8h2j0k7"),
    # an environment lookup's default given as a keyword, across lines
    ('JWT_SECRET = env.str(\n    "JWT_SECRET",\n    default="Xq8mK2zLv7Tp4Rn9Wb3Yc6Hd1Jg5Ks0A",\n)',
     "Xq8mK2zLv7Tp4Rn9Wb3Yc6Hd1Jg5Ks0A"),
    ("API_TOKEN = config('API_TOKEN', default='Lm4qZ8wXk2Tv9Rn5Pb7Yc3Hd')", "Lm4qZ8wXk2Tv9Rn5Pb7Yc3Hd"),
    # the value in the next clause, taken up again by a copula
    ("das WLAN-Passwort im Büro, das ist Qw7-zLm2Kx9, frag nicht nochmal", "Qw7-zLm2Kx9"),
    ("the jenkins password on the old box, it's r4Tq9_mZk2Lx, same user as before", "r4Tq9_mZk2Lx"),
    # base64 that starts with "/" (a key, not a path: one segment, random)
    ("mail.smtp.password=/Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Ks0AaBb", "/Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Ks0AaBb"),
])
def test_holdout7_forms_are_redacted(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    # placeholders made of words, one of them a stand-in (your, my, actual, here, example, test ...)
    "OPENAI_API_KEY=sk-proj-yourRealKeyGoesHere",
    "token: glpat-insertYourTokenHere",
    "--client-secret myAppRegistrationSecret --tenant contoso",
    "'SMTP_PASSWORD' => 'MyMailPassword!!',",
    "STRIPE_SECRET_KEY=sk_test_yourSecretKeyHere12345",
    "registry_password = example-registry-password",
    # documented samples: the shape a reader will get, or "e.g." after the form with placeholders
    "The generated key should look something like this: Zk8mQ2xLv7Tp4Rn9Wb3Yc6Hd1Jg5Ks0",
    "Format: redis://<user>:<password>@<host>:<port>, for example redis://cache:Fq7kL2mXz9@cache.local:6379",
    # generators and command substitution as the value
    "export SESSION_SECRET=`head -c 32 /dev/urandom | base64`",
    "JWT_SECRET=$(openssl rand -hex 32)",
    "Create a strong secret: `pwgen -s 48 1`",
    # code that passes a variable, a tuple of type and default
    "client = Anthropic(api_key=anthropic_key, max_retries=3)",
    "app.config.update(SECRET_KEY=secret_key, DEBUG=debug)",
    "    token=access_token)",
    "env = environ.Env(API_TOKEN=(str, 'unset'))",
    # an option's ordinary value after a password option on the same line
    'vault write auth/userpass/users/ci password="$CI_PASS" policies="deployer"',
    'openstack user create --password=$OS_PASSWORD --project="analytics" ci-bot',
    # digits after a name about a password, a run, a port
    "PASSWORD_RESET_TIMEOUT=259200",
    "password: 123456",
    "REDIS_PORT=6379 REDIS_PASSWORD=$REDIS_PASSWORD",
    # the search-only key of a client, named public by its comment
    "const search = algoliasearch('Q8ZK2M', '4f1e9c2a7b3d5e6f8a9c0b1d2e3f4a5b'); // search-only, public",
])
def test_holdout7_look_alikes_are_left_alone(text):
    assert scrub(text).text == text


def test_a_stand_in_is_words_with_a_stand_in_word_and_no_generated_part():
    for value in ("ghp_yourActualTokenHere123456789", "myServicePrincipalPassword", "YourSecretKey!!!",
                  "sample_api_key_here", "pypi-YourActualTokenHere"):
        assert secret_values.stand_in(value), value
    for value in ("CorrectHorseBatteryStaple", "purple-monkey-dishwasher",  # words, none a stand-in or about a secret
                  "Harbor-Lantern-Myrtle-92", "Someday-Orchard-44",  # a stand-in's letters inside a longer word
                  "nR0qptGt9fUw2s0l1vuBosorZxLkufBC",  # random
                  "yourToken83920174",  # a generated part
                  "s3cr3tpass",  # naming words spelled in leetspeak: a password someone made
                  "postgres://myuser:Kq8mL2zXv7@db.acme.io/app"):  # a URL's words are its host's
        assert not secret_values.stand_in(value), value


@pytest.mark.parametrize("text", [
    # the commonest passwords, as documentation writes them; values that only name a secret
    "kubectl create secret generic pg --from-literal=password=Passw0rd!",
    "DB_PASS=admin123",
    "JWT_SECRET=topsecretkey",
    "SESSION_SECRET=change-me",
    # dummies: runs of the alphabet or of digits, a phrase of two words
    "API_KEY=abcd1234",
    "TOKEN=xyz789",
    "app.use(session({ secret: 'purple monkey', resave: false }))",
    # a login that is its own password or a service's default
    "curl -u guest:guest http://localhost:15672/api/overview",
    # the shape of a vendor's token, described in a tutorial's words
    "A personal access token looks like this: ghp_R4nd0mL00k1ngT0k3nV4lu3F0rD0cs12345",
])
def test_common_passwords_dummies_and_shapes_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    ("const client = require('vonage')('ab12cd34', 'Hq8mK2zLx7Tp4Nc9Rb3Yw6');", "Hq8mK2zLx7Tp4Nc9Rb3Yw6"),
    ("my token looks like this: ghp_Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Ks0AaBb2", "ghp_Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Ks0AaBb2"),
    ("the vpn password is Harbor-Testament-2931, don't share it", "Harbor-Testament-2931"),
])
def test_credentials_beside_those_look_alikes_are_still_redacted(text, value):
    assert value not in scrub(text).text


def test_common_passwords_and_runs_are_told_from_chosen_ones():
    for value in ("P@ssw0rd", "S3cr3t", "admin123", "Password1!"):
        assert secret_values.common_password(value), value
    for value in ("Summer2024!", "Welcome2024!", "Tr0ub4dor&3", "hunter2x9Q"):
        assert not secret_values.common_password(value), value
    assert secret_values.in_runs("abc123") and secret_values.in_runs("abcd1234")
    assert not secret_values.in_runs("abd124") and not secret_values.in_runs("Kq8mL2zXv7")


def test_a_tutorial_describing_a_token_is_told_from_a_person_describing_theirs():
    described = "the bot token looks like 4839201756:AAHq8mK2zLx7Tp4Nc9Rb3Yw6Jd1Vg5Ks0Ae"
    assert scrub(described).text == described
    own = "my bot token looks like 4839201756:AAHq8mK2zLx7Tp4Nc9Rb3Yw6Jd1Vg5Ks0Ae and polling fails"
    assert "AAHq8mK2zLx7Tp4Nc9Rb3Yw6Jd1Vg5Ks0Ae" not in scrub(own).text


def test_a_mercado_pago_access_token_is_redacted_and_its_zeroed_sample_kept():
    token = "APP_USR-5820193746152038-120612-3b9d4c6ea0f15d7b8c3e1f7a2e9c2a4f-582019374"
    assert token not in scrub(f'sdk = mercadopago.SDK("{token}")').text
    sample = "MP_ACCESS_TOKEN=TEST-0000000000000000-000000-00000000000000000000000000000000-000000000"
    assert scrub(sample).text == sample


@pytest.mark.parametrize("text", [
    'Stripe::setApiKey("sk_test_4eC39HqLyjWDarjtT1zdp7dc");',  # Stripe's API reference
    "BOT_TOKEN=123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11",  # Telegram's Bot API docs
    '{"access_token": "ghu_16C7e42F292c6912E7710c838347Ae178B4a", "expires_in": 28800}',  # GitHub's docs
    'token = "xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy"',  # Slack's oauth.v2.access sample
])
def test_vendors_documentation_samples_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize("text", [
    '{"msg":"token rejected","token_id":"tok_5d7b3e9c2a4f8c3e","exp":1709288553}',  # a name about a token
    "data:\n  password: cGFzc3dvcmQ=",  # base64 of "password"
])
def test_a_name_about_a_credential_and_an_encoded_placeholder_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    ("data:\n  password: JXFSN2tNMnpYdjlMcA==", "JXFSN2tNMnpYdjlMcA=="),  # base64 of a password that starts with "%"
    ("DB_PASSWORD='%qR7kM2zXv9Lp'", "%qR7kM2zXv9Lp"),
])
def test_a_password_that_starts_with_a_percent_sign_is_no_reference(text, value):
    assert value not in scrub(text).text
    assert secret_values.placeholder("%(db_password)s") and secret_values.placeholder("%DB_PASSWORD%")


@pytest.mark.parametrize("text", [
    'docker run -e "MSSQL_SA_PASSWORD=MyStrong@Passw0rd" -p 1433:1433 mcr.microsoft.com/mssql/server',
    "OPENAI_API_KEY=sk-abc123def456",
    "JWT_SECRET=thisisnotasecret",
    "STRIPE_WEBHOOK_SECRET=whsec_test_secret",
    "REDIS_PASSWORD=redis_password",
    "SESSION_SECRET=generate-a-long-random-string",
    'NEXTAUTH_SECRET="random-secret-32-chars"',
    "SECRET_KEY=insecure-dev-key-do-not-use-in-production",
    'password = "correct horse battery staple"',  # xkcd 936
])
def test_more_placeholders_said_in_words_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    ("数据库账号root，密码Wq8mZ2xLv7", "Wq8mZ2xLv7"),  # a value right after the word, no space (Chinese)
    ("API anahtarım Lq8mK2zXv7Tp4Rn9Wb3Yc6 ama 401 dönüyor", "Lq8mK2zXv7Tp4Rn9Wb3Yc6"),  # Turkish "my key"
    ("şifrem Tq8m!L2zXv ama girmiyor", "Tq8m!L2zXv"),
])
def test_a_value_joined_to_its_word_and_a_possessive_word(text, value):
    assert value not in scrub(text).text


def test_an_image_name_and_tag_after_a_password_option_is_no_password():
    text = "docker run -e DB_USER=app -e DB_PASS=app -p 5432:5432 acme/postgis:16-3.4"
    assert scrub(text).text == text


# -- forms read on holdout8 (branch secrets7), each with sentences written for it -----------------------------
@pytest.mark.parametrize(("text", "value"), [
    ('export SSHPASS="Hq7mL2zXv9Kp4Tn"\nsshpass -e rsync -a ./site deploy@10.0.4.7:/srv', "Hq7mL2zXv9Kp4Tn"),
    ("DBPASS='Rz8kQ2mLx7Vn' ./migrate.sh", "Rz8kQ2mLx7Vn"),
    ("java -jar codegen.jar -h10.1.1.9 -P3306 -uadmin -pWm4zQ8kLp2 -dshop", "Wm4zQ8kLp2"),
    ('mvn exec:java -Dexec.args="-ureporter -pTq7!Lm2zX9 -dsales"', "Tq7!Lm2zX9"),
    ("headers: { Authorization: 'Bearer ' + 'Kq8mL2zXv7Tp4Rn9Wb3Yc6' }", "Kq8mL2zXv7Tp4Rn9Wb3Yc6"),
    ("'Authorization': `Basic `+`AcmeClientId01`+`:`+`Zx9Lq2mK7vTp4Rn8Wb3Yc6Hd`", "Zx9Lq2mK7vTp4Rn8Wb3Yc6Hd"),
    ('kubectl get secret grafana -o jsonpath="{.data.admin-password}" | base64 --decode\nVt6qLm2zXk-R', "Vt6qLm2zXk-R"),
    ("vault kv get -field=token secret/ci\nhvs.Kq8mL2zXv7Tp4Rn9Wb3Yc6", "hvs.Kq8mL2zXv7Tp4Rn9Wb3Yc6"),
    ("스테이징 계정은 deploy, 비밀번호는 TqwerMnbvZx7 입니다.", "TqwerMnbvZx7"),
    ("ステージングのパスワードは Hoshizora7x です。", "Hoshizora7x"),
])
def test_forms_read_on_holdout8_are_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    # Kubernetes' "Managing Secrets using kubectl" sample password, and its earlier one
    "kubectl create secret generic app-db --from-literal=username=admin --from-literal=password='S!B\\*d$zDsb='",
    "echo -n '1f2d1e2e67df' > ./password.txt",
    "rsync -e \"sshpass -p [접속 계정의 비밀번호] ssh\" ./out admin@10.2.0.8:/data",  # a bracketed description
    "sshpass -p [mot de passe du compte] ssh ops@10.0.0.12",
    'client = OpenAI(api_key="sk-proj-Q8mxxxxxxx")',  # masked by hand
    "token: ghp_4fK2****",
    "deploy_key: |  # -----BEGIN OPENSSH PRIVATE KEY----- ...",  # a header, its body left out
    "az login --service-principal -u 3f1a7c9e-2b4d-4e8f-9a6c-1d2e3f4a5b6c"
    " --tenant 7c2e9a1f-4b3d-4c8e-8f1a-2b3c4d5e6f7a",
    "the password is in the vault; scp backup.tar.gz root@192.168.10.4:/var/backups",
    "비밀번호는 8자 이상 입니다",
    'kubectl get secret db -o jsonpath="{.data.username}" | base64 -d\nadministrator01',
])
def test_look_alikes_read_on_holdout8_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    ("username ops privilege 15 password 0 Vq3!xLm8,2T\nline con 0", "Vq3!xLm8,2T"),  # Cisco IOS, clear text
    ("enable password 7 0822455D0A16544541", "0822455D0A16544541"),  # type 7: reversible
    ("rwcommunity Hz7kQ2mLx9Tp 192.168.0.0/24", "Hz7kQ2mLx9Tp"),  # net-snmp
    ("snmp-server community Wq8mZ2xLv7 RO", "Wq8mZ2xLv7"),
    ("bundle config set --global gems.graphql.pro 4f9c2e71:Kq8mL2zXv7", "4f9c2e71:Kq8mL2zXv7"),  # a gem source
])
def test_network_device_and_gem_source_credentials_are_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    "rocommunity public default -V systemonly",  # net-snmp's default community
    "username admin privilege 15 secret 9 $9$nhEmQVczB7dqsO$X.HsgL6x1il0RxkOSSvyQYwucySCt7qFm4v7pqCxkKM",  # a hash
    "remind users to change the password 7 days before it expires",
    "bundle config set --global gems.acme.io ${BUNDLE_USER}:${BUNDLE_PASS}",
])
def test_network_device_and_gem_source_look_alikes_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    ("I rotated the staging password, the new one is Lq8m.K2zXv7 — tell Ana", "Lq8m.K2zXv7"),
    ("Das WLAN-Passwort wurde geändert, das neue: Tq7!mK2zXv9", "Tq7!mK2zXv9"),
    ("VPN şifresi değişti, yenisi: Wz4.kQ8mLx2", "Wz4.kQ8mLx2"),
])
def test_the_new_one_takes_the_password_up_after_a_comma(text, value):
    assert value not in scrub(text).text
    left = "password changed, the new one is in 1Password"
    assert scrub(left).text == left


@pytest.mark.parametrize("text", [
    # a value that is the credential's own name, or a description of it in words of any script
    'db.connect("db01", user="user", password="password")',
    "client.login(login='login', passwd='passwd')",
    'final String PASSWORD = "su_contraseña_aquí";',
    'ANTHROPIC_API_KEY="Anthropic APIキー"',
    'DB_PASSWORD="ваш пароль"',
    'SECRET_TOKEN = "votre-clé-secrète"',
    # a reference: a Symfony parameter beginning a path, a property read ending in a variable's name
    "JWT_PUBLIC_KEY=%kernel.project_dir%/var/keys/public.pem",
    "const cfg = { STRIPE_SECRET_KEY: globalThis.CONFIG?.STRIPE_SECRET_KEY ?? '' };",
    # an option set to a flag whose name holds a credential's word
    'JAAS=com.example.LoginModule required storeKey=false useTicketCache=true principal="svc@EXAMPLE.ORG";',
])
def test_stand_ins_read_on_holdout9_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    ('password="Qz7mK2xLv9Tp"', "Qz7mK2xLv9Tp"),  # a value, not its own name
    ('DB_PASSWORD="Mañana7#Kq2"', "Mañana7#Kq2"),  # an accented letter in a password with digits
])
def test_values_beside_stand_ins_are_still_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize(("text", "value"), [
    ("$ openssl rand -base64 24\nKq8mL2zXv7Tp4Rn9Wb3Yc6Hd\n$ export APP_KEY=...", "Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd"),
    (">>> secrets.token_hex(16)\n'9e2b7c41f0a85d36c1e4b7a92f0d3c58'", "9e2b7c41f0a85d36c1e4b7a92f0d3c58"),
    ("php > echo bin2hex(random_bytes(16));\n4f1c9a7e2b8d3065f9e1a2c7b4d8e3f0", "4f1c9a7e2b8d3065f9e1a2c7b4d8e3f0"),
    ("$ cat storage/oauth-private.key.secret\nb7e3f91c2a4d6058e1f7c3a9b2d4e6f8", "b7e3f91c2a4d6058e1f7c3a9b2d4e6f8"),
])
def test_what_a_generator_prints_is_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    "$ cat README.md\n4f1c9a7e2b8d3065f9e1a2c7b4d8e3f0",
    "$ openssl rand -hex 16\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
])
def test_what_other_commands_print_is_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    ("echo 'Wq7#mK2zLx9' | saslpasswd2 -a imap -c -p mailuser", "Wq7#mK2zLx9"),  # piped into a *passwd command
    ('mosquitto_pub -h iot.lan -t v1/devices/me/telemetry -u "Zq8mK2xLv7Tp4Rn9Wb3Y" -m "{}"',
     "Zq8mK2xLv7Tp4Rn9Wb3Y"),  # a device's access token as the MQTT user name
    ('tok = Api.AccessToken.issue(client, "1654871234", "7b3e9f1c2a4d6058e1f7c3a9b2d4e6f8")',
     "7b3e9f1c2a4d6058e1f7c3a9b2d4e6f8"),  # a token call given an id, then its secret
    ("アクセストークンを発行しました。サーバーに設定してください: Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7Ze2Xc9Vb4Nm8=",
     "Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7Ze2Xc9Vb4Nm8="),  # issued, then given after a colon
])
def test_forms_read_on_holdout9_are_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    "ssh -u deploy_user_production_01 build01",  # a user name, not a token
    "az login --service-principal -u 3f1a7c9e-2b4d-4e8f-9a6c-1d2e3f4a5b6c --tenant acme",
    "The token was rotated. The commit that did it: 9e2b7c41f0a85d36c1e4b7a92f0d3c589e2b7c41",  # hex: a commit
])
def test_look_alikes_read_on_holdout9_are_left_alone(text):
    assert scrub(text).text == text


def test_a_connecting_calls_password_one_argument_a_line_is_found():
    text = ("const db = new Sequelize(\n    'shop', // имя базы\n    'admin', // пользователь\n"
            "    'Kq8mL2zXv7Tp', // пароль\n    { host: 'localhost' }\n);")
    assert "Kq8mL2zXv7Tp" not in scrub(text).text
    other = 'print(\n  "hello",\n  "world",\n  "Wz8#qK2mLx7"\n)'  # not a connecting call
    assert scrub(other).text == other


def test_a_login_variable_for_a_registry_holds_its_secret():
    assert "Kq8%mL_zXv7TpRnWb3" not in scrub("export DOCKER_LOGIN_ACME_REGISTRY=Kq8%mL_zXv7TpRnWb3").text
    for text in ("export DOCKER_LOGIN_USER=ci-bot", "DB_LOGIN=admin",
                 "export DOCKER_LOGIN_ACME=$(cat /run/secrets/reg)"):
        assert scrub(text).text == text


_ANTHROPIC_BODY = "api03-Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7Ze2Xc9Vb4Nm8Lk3Jh6Gf5Ds4Ap1Mo0Ni9Bu8Vy7Tr6Ew5Qx4Zc3"


@pytest.mark.parametrize(("text", "value"), [
    ("# /etc/redis/redis.conf\nrequirepass Tq8mK2zXv7Lp4Rn9", "Tq8mK2zXv7Lp4Rn9"),  # a directive ending in pass
    ("masterauth Wz7qL2mKx9Pv", "Wz7qL2mKx9Pv"),  # ... or in auth
    ("127.0.0.1:6379> AUTH Lq9mK2zXv7Tp\nOK", "Lq9mK2zXv7Tp"),  # redis-cli's AUTH line
    ("const t = createTransport({ auth: { user: 'ops@acme.io', pass: 'Zq8.mKx2Lv' } });", "Zq8.mKx2Lv"),
    ('creds = {"username": "ops", "pass": "Hz7kQ2mLx9"}', "Hz7kQ2mLx9"),  # pass beside user in a dict
    ('the mailer now uses an app password: MAIL_PASS="qwmz kfpt ralx voeb"', "qwmz kfpt ralx voeb"),
    ('printf "Rk7#mQ2zLx9" | docker secret create api_password -', "Rk7#mQ2zLx9"),
    ("echo -n Vb4kT9qLm2Xz | gh secret set DEPLOY_TOKEN", "Vb4kT9qLm2Xz"),
    ("drone secret add --repository acme/web --name npm_token --data Mz8qK2xLv7Tp", "Mz8qK2xLv7Tp"),
    ("woodpecker-cli secret add \\\n  --name registry_pw \\\n  --value Pq7!zLm2Kx9", "Pq7!zLm2Kx9"),
    ("without the prefix: " + _ANTHROPIC_BODY, _ANTHROPIC_BODY),  # an Anthropic key pasted without sk-ant-
    ("Logging in...\n  Mz4kQ9xLv2Tp7Rn3Wb8Yc1Hd.Gx7Lq2.Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5\nError: invalid token",
     "Mz4kQ9xLv2Tp7Rn3Wb8Yc1Hd.Gx7Lq2.Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5"),  # a Discord bot token, bare
    ('db:\n  password: ";Wq7mK2zLx9Tp"', "Wq7mK2zLx9Tp"),  # quoted for YAML, a leading semicolon
    ("Das Token für Prod, bitte nicht teilen: Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7Ze",
     "Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7Ze"),  # a comma's clause between the word and the colon
])
def test_forms_read_on_holdout10_are_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    "spring:\n  datasource:\n    password: @db.password@",  # Maven resource filtering fills it in at build
    "Der Client-Key darf im Browser stehen: test_ck_Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs",  # Toss' client key
    "auth required pam_unix.so",  # PAM's auth line: words, not a password
    "# requirepass foobared",  # Redis' sample config, commented
    "--value ${{ secrets.TOKEN }}",  # a reference
    "you shall not pass",
    'DB_PASSWORD="op://Staging/billing-db/password"',  # a 1Password reference
    'password: ",,,,,,,"',  # punctuation only
    "The key length was raised, then we ran: Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7Ze",  # a word about the key
    "The token cache was cleared, then the build restored: macOS-gradle-4f2a9c1e7b3d5f8a0c6e2b4d9f1a3c5e",
])
def test_look_alikes_read_on_holdout10_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    ("Sent: AUTH LOGIN\nGot: 334 VXNlcm5hbWU6\nSent: Ym9iQGV4YW1wbGUub3Jn\nGot: 334 UGFzc3dvcmQ6\n"
     "Sent: S3E4bUwyelh2N1Rw\nGot: 235 ok", "S3E4bUwyelh2N1Rw"),  # SMTP AUTH LOGIN: the line after Password:
    ("C: AUTH LOGIN\nS: 334 VXNlcm5hbWU6\nC: Ym9i\nS: 334 UGFzc3dvcmQ6\nC: UXc3bUsyekx4OQ==\n", "UXc3bUsyekx4OQ=="),
    ("mail.smtp.host=smtp.example.org\nmail.smtp.userpassword=Qw7!mK2zLx9", "Qw7!mK2zLx9"),  # a dotted name
    ("nodemailer.createTransport({\n  auth: {\n    user: 'ops@gmail.com',\n    pass: 'qwmz kfpt ralx voeb'\n  }\n})",
     "qwmz kfpt ralx voeb"),  # an app password under user: on its own line
    ('plink -ssh admin@10.0.0.3 -pw Kx7-mQ2zLp9 "uptime"', "Kx7-mQ2zLp9"),  # PuTTY's password option
    ("firebase deploy --token 1//0gKq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7ZeKq8mL2zXv7Tp4Rn9Wb3",
     "1//0gKq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7ZeKq8mL2zXv7Tp4Rn9Wb3"),  # a Google OAuth refresh token
    ("ASAAS_API_KEY=$aact_hmlg_Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7ZeKq8mL2zX",
     "$aact_hmlg_Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7ZeKq8mL2zX"),  # an Asaas key
])
def test_forms_read_on_holdout11_are_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    "mail.smtp.password=${SMTP_PASSWORD}",  # a reference
    "spring.datasource.password=changeme",  # a stand-in word
    "user: 'a@b.c',\npass: process.env.PASS",  # read from the environment
    "plink -ssh host -pw $PW",  # a variable
    "see 1//0 for docs",
    "S: 334 UGFzc3dvcmQ6\nC: *\n",  # a masked dialogue
    "Firebase API key for the web app, --token not needed: AIzaSy is its prefix",
])
def test_look_alikes_read_on_holdout11_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize("text", [
    "PAYMENTS_KEY=sk_live_* is what the docs show; rk_live_* is the restricted one",  # a wildcard after a prefix
    "ANTHROPIC_API_KEY=sk-ant-xxx  # then restart",  # a prefix then x's, cut short on purpose
    "if the key were `sk-AbCdEfGhIjKlMnOpQrStUvWxYz0123`, the header would read so",  # the alphabet in order
    "decode eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9 and you get the header only",  # a JWT header alone
    "  token: {{ b64enc .Values.apiToken }}",  # a template's expression
    "    secret = base64encode(var.client_secret)",  # a call over a reference
])
def test_stand_in_shapes_read_on_holdout11_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    ("api_key = sk_live_Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd", "sk_live_Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd"),  # a key, no wildcard
    ("the key is Qm8xAbcdK2zLv7Tp4Rn9W", "Qm8xAbcdK2zLv7Tp4Rn9W"),  # a short run of the alphabet only
    ("token = eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7Ze",
     "eyJzdWIiOiIxMjM0In0.Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7Ze"),  # a whole JWT
    ('    password = "Kq8mL2zXv7Tp"  # was base64encode(var.x)', "Kq8mL2zXv7Tp"),
])
def test_keys_beside_the_stand_in_shapes_are_still_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize(("text", "value"), [
    ("Пароль от базы поменял, теперь такой: Kq8m_L2zX9vT", "Kq8m_L2zX9vT"),  # "changed it, now it is:"
    ("I rotated the DB password, now it is Kq8m_L2zX9vT", "Kq8m_L2zX9vT"),
    ("La contraseña cambió, ahora es: Kq8m!L2zX9vT", "Kq8m!L2zX9vT"),
])
def test_a_clause_that_takes_the_word_up_again_with_now_keeps_the_value(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", ["the password changed, now what?", "the token expired, now we use OAuth"])
def test_now_after_a_credential_word_without_a_value_is_left_alone(text):
    assert scrub(text).text == text


def test_a_key_that_begins_with_a_dollar_by_its_format_is_no_variable():
    value = "$aact_prod_Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7ZeKq8mL2zXv7Tp4Rn9Wb3"
    assert value not in scrub(f"A chave da API de produção é {value}, não comita isso.").text
    assert scrub("A chave da API fica em $ASAAS_API_KEY, não comita isso.").text.endswith("isso.")


@pytest.mark.parametrize(("text", "value"), [
    # abbreviations of "password" as a name's last word, in YAML, .env and code
    ('mysql_user: wp\nmysql_pswd: "Vt3-kQz9#mLx2Rp"', "Vt3-kQz9#mLx2Rp"),
    ("REDIS_PSWD=Lq7mK2zXv9Tp", "Lq7mK2zXv9Tp"),
    ('db_pword = "Hn4#kQz8mLx2"', "Hn4#kQz8mLx2"),
    ("SMTP_PW=Zr8mK3qXv7Lp", "Zr8mK3qXv7Lp"),
    # key/value pair arrays whose key names a credential: PHP/Ruby `=>`, CloudFormation, a `user:pass` auth
    ("array(\n  'key' => 'DEPLOY_PASS',\n  'value' => 'Wq7mK2zLx9Tp4Rn8',\n)", "Wq7mK2zLx9Tp4Rn8"),
    ("{ :key => 'SMTP_PASSWORD', :value => 'Kq8m#L2zXv7Tp' }", "Kq8m#L2zXv7Tp"),
    ('[{"ParameterKey": "DBPassword", "ParameterValue": "Mz7#kQ2xLv9Tp"}]', "Mz7#kQ2xLv9Tp"),
    ("'key' => 'REGISTRY_AUTH',\n'value' => 'deployer:Tq8mK2zXv7Lp4Rn9'", "Tq8mK2zXv7Lp4Rn9"),
    # webhook URLs whose path carries the secret: Teams' connector URL (GROUP@TENANT/IncomingWebhook/KEY/ID)
    ("https://outlook.office.com/webhook/1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d@6f5e4d3c-2b1a-4c9d-8e7f-6a5b4c3d2e1f"
     "/IncomingWebhook/9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a49/3e4f5a6b-7c8d-4e9f-a0b1-c2d3e4f5a6b7",
     "9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a49"),
    ("https://acme.webhook.office.com/webhook/1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d@6f5e4d3c-2b1a-4c9d-8e7f-6a5b4c3d2e1f"
     "/IncomingWebhook/9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a49/3e4f5a6b-7c8d-4e9f-a0b1-c2d3e4f5a6b7",
     "9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a49"),
    # credentials files: rsync's secrets file, pppd's chap-secrets, s3fs' passwd file, written by echo
    ("# /etc/rsyncd.secrets\nmirror:Kv8mQ2zLx7Tp\nbackup:Rz9#kL2mXq7", "Rz9#kL2mXq7"),
    ("# /etc/rsyncd.secrets\nmirror:Kv8mQ2zLx7Tp\nbackup:Rz9#kL2mXq7", "Kv8mQ2zLx7Tp"),
    ('# /etc/ppp/chap-secrets\n"vpn1" pptpd "Hq7mK2zXv9Lp" *', "Hq7mK2zXv9Lp"),
    ("$ cat ~/.passwd-s3fs\nAKIAQ7MK2ZXV9LP4RN8W:Tq8mK2zXv7Lp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7Ze",
     "Tq8mK2zXv7Lp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7Ze"),
    ("echo 'mirror:Jw7mK2zQx9Lp' > /etc/rsyncd.secrets && chmod 600 /etc/rsyncd.secrets", "Jw7mK2zQx9Lp"),
    # Oracle's user/password@host connect strings: JDBC thin URL, sqlplus, Data Pump
    ("java.sql.SQLException: (url=jdbc:oracle:thin:hr/Kz7*mQ2xLv9T@//db7:1521/PDB1)", "Kz7*mQ2xLv9T"),
    ("sqlplus app_owner/Wq8mK2zLx7Tp@ORCLPDB1 @install.sql", "Wq8mK2zLx7Tp"),
    ("expdp hr/Tz9kQ2mLx7Vn@xepdb1 directory=dp dumpfile=hr.dmp", "Tz9kQ2mLx7Vn"),
])
def test_forms_read_on_holdout12_are_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    "pswd_length: 16",  # about a password
    "DB_PSWD=${DB_PSWD}",  # a reference
    "array('key' => 'DEPLOY_USER', 'value' => 'deployer')",  # a user's key
    "array('key' => 'DEPLOY_PASS', 'value' => getenv('DEPLOY_PASS'))",  # read from the environment
    "{ key: 'BASIC_AUTH', value: 'admin:admin' }",  # a default login
    "see https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/add-incoming-webhook",
    "https://outlook.office.com/webhook/{group-id}@{tenant-id}/IncomingWebhook/{key}/{connector-id}",
    "secrets file = /etc/rsyncd.secrets\nauth users = backup",  # the file named, no login line
    "# /etc/rsyncd.secrets\nbackup:<password>",  # a placeholder
    "# /etc/ppp/chap-secrets\n# client server secret IP addresses",
    "# /etc/passwd\nbackup:x:34:34:backup:/var/backups:/usr/sbin/nologin",  # not a secrets file, no password
    "git@github.com:acme/repo.git and feature/login@main",  # a ref, not a connect string
    "sqlplus scott/tiger@orcl",  # Oracle's documented sample login
    "sqlplus app/$APP_PASSWORD@db",  # a variable
])
def test_look_alikes_read_on_holdout12_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize("text", [
    # identifiers documented as no secret: a Twilio account SID in an API URL, OAuth client ids (RFC 6749 2.2)
    "TwilioRestException: HTTP 401\n https://api.twilio.com/2010-04-01/Accounts/AC5e8f1a9c7b2d4c6e8a1f9d3b5c7e2a4f/Calls.json",
    "DISCORD_TOKEN=...\nDISCORD_CLIENT_ID=571938246015837294\nDISCORD_GUILD_ID=803716594283750162",
    "discord_client_id: 628174930561827345",
    # a lookup table or a file that holds the passwords, not a password (Postfix's maps, a typed path)
    "smtp_sasl_password_maps = hash:/etc/postfix/sasl_passwd",
    "smtpd_sasl_password_maps = proxy:mysql:/etc/postfix/mysql-sasl.cf",
    "DB_PASSWORD=file:/run/secrets/db_password",
])
def test_identifiers_and_references_read_on_holdout12_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    ("curl https://api.twilio.com/2010-04-01/Accounts/AC5e8f1a9c7b2d4c6e8a1f9d3b5c7e2a4f/Calls.json"
     " -u AC5e8f1a9c7b2d4c6e8a1f9d3b5c7e2a4f:7c1e9a3f5b2d8e4a6c0f9b1d3e5a7c2f", "7c1e9a3f5b2d8e4a6c0f9b1d3e5a7c2f"),
    ("DISCORD_CLIENT_ID=571938246015837294\nDISCORD_CLIENT_SECRET=Wq8mK2zLx7Tp4Rn9Yb3Vc6Hd1Jg5Fs0Q",
     "Wq8mK2zLx7Tp4Rn9Yb3Vc6Hd1Jg5Fs0Q"),
    ("smtp_sasl_password = Kq8m#L2zXv7T", "Kq8m#L2zXv7T"),
    ("DB_PASSWORD=hash:Kq8mL2zXv7Tp", "hash:Kq8mL2zXv7Tp"),  # no path after the type: a value
])
def test_secrets_beside_identifiers_and_references_are_still_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize(("text", "value"), [
    # a password led by a symbol, quoted or after a word in another language
    ("db:\n  user: app\n  password: '#q7#^Lm2zXv%!'", "#q7#^Lm2zXv%!"),
    ("пароль от панели: ^Kq8mZ2xLvT41 (логин admin)", "^Kq8mZ2xLvT41"),
    ('SMTP_PASSWORD="#Wz8qK2m!Lx7"', "#Wz8qK2m!Lx7"),
    ("password: '&9Tq8mK2zLv7!'", "&9Tq8mK2zLv7!"),  # "&" then no anchor's name
    ("password: '%!Hq7mK2zXv9Lp'", "%!Hq7mK2zXv9Lp"),  # "%" then no reference
    # a literal written into a variable named for a credential, in prose of any language
    ("Hola, prueba escribiendo 'K_RmQp7zX' en la variable $password de db.php", "K_RmQp7zX"),
    ("put 'Tq8#mK2zLv' into $db_pass and retry", "Tq8#mK2zLv"),
    ("mets 'Vn7kQ2zLx9' dans la variable $password", "Vn7kQ2zLx9"),
    # a tool's positional host, system account and password
    ('SharpSQLTools.exe 10.0.0.7 sa "Hq7^+mK2zLx" master', "Hq7^+mK2zLx"),
    ("python3 mssqlclient.py 10.10.10.9 sa Kq8m#L2zXv7 -windows-auth", "Kq8m#L2zXv7"),
    ("dbtool db01.acme.io:1433 root Wq8mK2zLx7Tp4Rn9", "Wq8mK2zLx7Tp4Rn9"),
])
def test_symbols_literals_and_positional_accounts_read_on_holdout12_are_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    "color: '#ff8800'",  # a colour
    'token: "#{ENV}"',  # Ruby's interpolation
    "password: '#release2024'",  # a name after "#"
    'pattern: "^[a-z0-9]{32}$"',  # a regular expression
    "\"dependencies\": {\"jsonwebtoken\": \"^9.0.2\"}",  # a version range
    "password: $DB_PASSWORD",  # a reference
    'password: "$$DB_PASS"',  # docker compose's escaped reference
    'token: "%env(API_TOKEN)%"',  # Symfony's
    'password: "%(db_password)s"',  # Python's
    'password: "@db.password@"',  # Maven's filtering
    "password: &pw Hunter2xTq",  # a YAML anchor
    "write 'changeme' to $password",  # a stand-in
    "compare 'Kq8mL2zXv7' with $password_hash",  # about a password, not one
    "set 'localhost' in $db_host",
    "ssh 10.0.0.5 root uptime",  # a command, not a password
    "SharpSQLTools.exe 10.0.0.7 sa <password> master",
])
def test_symbol_literal_and_account_look_alikes_read_on_holdout12_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    ("DB_PSSWD=Hq7mK2zXv9Lp", "Hq7mK2zXv9Lp"),  # more spellings of "password"
    ('admin_passwrd: "Tq8#mK2zLv7"', "Tq8#mK2zLv7"),
    ('mqtt_passw = "Vn7#kQ2zLx9"', "Vn7#kQ2zLx9"),
    ('"parameters": {\n  "adminPassword": {\n    "value": "Wz8#qK2mLx7T"\n  }\n}', "Wz8#qK2mLx7T"),  # ARM parameters
    ("alice@acme.io:{PLAIN}Kq8m#L2zXv7::::::", "Kq8m#L2zXv7"),  # Dovecot passwd-file, plain scheme
    ("# /etc/davfs2/secrets\nhttps://dav.acme.io/remote.php/webdav alice Lq7mK2zXv9Tp", "Lq7mK2zXv9Tp"),
    ("sqlldr userid=scott/Rz9#kL2mXq7@orcl control=load.ctl", "Rz9#kL2mXq7"),  # Oracle's tools
    ("rman target sys/Jw7mK2zQx9Lp@cdb1", "Jw7mK2zQx9Lp"),
])
def test_neighbouring_forms_of_holdout12s_causes_are_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    "the passw field is required",
    '"adminUsername": {"value": "azureuser"}',  # a user name's parameter
    '"adminPassword": {"reference": {"keyVault": {"id": "/subscriptions/x"}, "secretName": "vmpw"}}',  # a reference
    "bob:{SHA512-CRYPT}$6$Kq8mL2zX$v7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Qa7Ze::::",  # a hashed scheme
    '# /etc/davfs2/secrets\n/media/dav alice "<password>"',  # a placeholder
])
def test_neighbouring_look_alikes_of_holdout12s_causes_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    # a literal written into a variable named by a word for one or by its shape, not only by a sigil
    ("pon 'Wq8#mK2zLx7' en la variable DB_PASSWORD", "Wq8#mK2zLx7"),
    ("put 'Tz9#kQ2mLx7' in the SMTP_PASSWORD variable", "Tz9#kQ2mLx7"),
    ("escribe 'Hn4#kQz8mLx2' en spring.datasource.password", "Hn4#kQz8mLx2"),
    # Windows-style password options, a login before a host with no scheme
    ("xfreerdp /v:10.0.0.8 /u:administrator /p:'Rz9#kL2mXq7' /cert:ignore", "Rz9#kL2mXq7"),
    ("cmdkey /add:srv01 /user:acme\\ops /pass:Vn7#kQ2zLx9", "Vn7#kQ2zLx9"),
    ("schtasks /create /tn nightly /ru svc_backup /rp Kq8mL2zXv7Tp /tr backup.cmd", "Kq8mL2zXv7Tp"),
    ("impacket-psexec administrator:'Jw7#mK2zQx9'@10.0.0.8", "Jw7#mK2zQx9"),
    ("mssqlclient.py sa:Lq7mK2zXv9Tp@10.0.0.8", "Lq7mK2zXv9Tp"),
])
def test_more_neighbouring_forms_of_holdout12s_causes_are_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    "see 'docs/README.md' for the DB_PASSWORD variable",  # a path
    "the value 'abc' in the password field",  # too short
    "use 'HEAD~3' for the REF_TOKEN_NAME",
    "robocopy C:\\src D:\\dst /purge /r:3 /w:5",  # other slash options
    "cd /p/projects",
    "mailto:john@example.com and git@github.com:acme/x.git",
    "xfreerdp /v:10.0.0.8 /u:admin /p:$RDP_PASSWORD",  # a variable
])
def test_more_neighbouring_look_alikes_of_holdout12s_causes_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize("text", [
    # a YAML tag that names where the secret is (Home Assistant's and ESPHome's `!secret name`), quoted in prose
    "- Password: `!secret wifi_pw_garage`",
    "* password: '!secret zigbee_mqtt_pass'",
    # the word itself as the value: a stand-in
    'MQTT_PASSWORD = "password"',
    "db_pass = 'passwd'",
    # a run of one letter to a key's end, a name in angle brackets after a vendor's prefix
    "MAPS_API_KEY=AIzaSyBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
    "PAYMENT_WEBHOOK_SECRET=whsec_<signing_secret>",
    "STRIPE_KEY=sk_test_<your key>",
    # a Google API key in google-services.json (Firebase documents it as shipped in the app)
    '"api_key": [ { "current_key": "AIzaQm7Kx2Lp9Zt4Vb8Nc3Wr6Yh1Jd5Gf0Sa2Ek" } ]',
    # Pusher's app key is the client's
    "PUSHER_APP_KEY=7e2c9a4b1d8f3e6a0c5b\nPUSHER_APP_CLUSTER=eu",
    "MIX_PUSHER_APP_KEY: 9a3f1c7e5b2d8a4c6e0f",
    # a value its line notes as the documented default
    "  - ADMIN_PASS: Sw0rdf1shX (->default)",
    "password: Adm1nPa55 (default)",
])
def test_look_alikes_of_holdout13s_false_positives_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    # the counterparts: a real value beside each look-alike's cue
    ("- Password: `Kq8#mL2zXv7`", "Kq8#mL2zXv7"),
    ('MQTT_PASSWORD = "Tz9kQ2mLx7Wp"', "Tz9kQ2mLx7Wp"),
    ("PAYMENT_WEBHOOK_SECRET=whsec_Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Q", "whsec_Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Fs0Q"),
    ("TWITTER_BEARER=AAAAAAAAAAAAAAAAAAAAAKq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5", "Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5"),
    ("PUSHER_APP_SECRET=4d8b2f6a0e9c3a7b1f5d", "4d8b2f6a0e9c3a7b1f5d"),
    ("MAPS_API_KEY=AIzaQm7Kx2Lp9Zt4Vb8Nc3Wr6Yh1Jd5Gf0Sa2Ek", "AIzaQm7Kx2Lp9Zt4Vb8Nc3Wr6Yh1Jd5Gf0Sa2Ek"),
    ("  - ADMIN_PASS: Sw0rdf1shX", "Sw0rdf1shX"),
])
def test_counterparts_of_holdout13s_false_positives_are_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize(("text", "value"), [
    # a host option, then a password option (no user option): RCON and Redis clients
    ('./mcrcon -H 10.0.0.4 -P 25575 -p Rz8-kLq2mXv7Tp "say hi"', "Rz8-kLq2mXv7Tp"),
    ("rcon-cli --host mc.local --port 25575 --password Wq8#mK2zLx7", "Wq8#mK2zLx7"),
    ('rcon -a 127.0.0.1:25575 -p Hz7#kQ2mLx9 "list"', "Hz7#kQ2mLx9"),
    # a client with no user, given a host and its password
    ('with MCRcon("127.0.0.1", "Kq8#mL2zXv7") as mcr:', "Kq8#mL2zXv7"),
    ('r = redis.StrictRedis("cache", 6379, 0, "Tz9#kQ2mLx7")', "Tz9#kQ2mLx7"),
    # the one literal argument of a call named for taking the secret
    ('rcon.authenticate("Tz9#kQ2mLx7");', "Tz9#kQ2mLx7"),
    ("client.setPassword('Vn7#kQ2zLx9Wp')", "Vn7#kQ2zLx9Wp"),
    ('api.with_token("Kq8mL2zXv7Tp4Rn9Wb3Yc6")', "Kq8mL2zXv7Tp4Rn9Wb3Yc6"),
    # a Google app password joined, in a call beside a Gmail address and in prose in other languages
    ('MailSettings cfg("ops.team@gmail.com", "qmzvbtrkwlxpyhnd");', "qmzvbtrkwlxpyhnd"),
    ("la contraseña de aplicación es vkqwzmtrbxplnhyd y no funciona", "vkqwzmtrbxplnhyd"),
    ("App-Passwort für SMTP: ztkqbvmwrplxnhyd", "ztkqbvmwrplxnhyd"),
    ("mot de passe d'application wqzkmbvtrlxpnhyd refusé", "wqzkmbvtrlxpnhyd"),
    # Telegram's api_hash as an option, an assignment and a keyword argument
    ("tg-bot-api --api-id=1234567 --api-hash=9c1e7a4b2d8f3e6a0c5b7d9e1f3a5c7b", "9c1e7a4b2d8f3e6a0c5b7d9e1f3a5c7b"),
    ("TG_API_HASH=4e8b2f6a0c9d3e7b1f5a8c2d6e0b4f9a", "4e8b2f6a0c9d3e7b1f5a8c2d6e0b4f9a"),
    ('Client("bot", api_id=1234567, api_hash="7d3a9e1c5b8f2d6a0e4c7b9f1a3d5e8c")', "7d3a9e1c5b8f2d6a0e4c7b9f1a3d5e8c"),
    # an abbreviation of "secret" as a setting's name
    ("SRCT=9f2c7a1e4b8d3f6a0c5e9b2d7f1a4c8e3b6d0f5a", "9f2c7a1e4b8d3f6a0c5e9b2d7f1a4c8e3b6d0f5a"),
    ("JWT_SCRT: Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5", "Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5"),
    ('"smtp_pswd": "Tz9kQ2mLx7Wp4R"', "Tz9kQ2mLx7Wp4R"),
    # a Redis directive inside a sentence, ended by a full-width comma or by an ideographic full stop
    ("配置文件里写的是 requirepass Kq8#mL2zXv7，重启后生效。", "Kq8#mL2zXv7"),
    ("replica 上也要设置 masterauth Tz9kQ2mLx7Wp。", "Tz9kQ2mLx7Wp"),
    ("I had set requirepass Vn7#kQ2zLx9 in the wrong file", "Vn7#kQ2zLx9"),
    # a value in brackets right after a credential word
    ("jwt-auth secret [Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5] set successfully.", "Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5"),
    ("avec mon mot de passe (Rz8-kLq#2mXv7) la connexion échoue", "Rz8-kLq#2mXv7"),
    ("I reset the password (Wq8#mK2zLx7) twice", "Wq8#mK2zLx7"),
    # a value a copula then names
    ("im Log steht Kq8mL2zXv7Tp, das ist mein REDIS_PASSWORD.", "Kq8mL2zXv7Tp"),
    ("the output shows Tz9kQ2mLx7Wp, which is my DB_PASS", "Tz9kQ2mLx7Wp"),
    ("je vois Vn7kQ2zLx9Wp, c'est mon mot de passe", "Vn7kQ2zLx9Wp"),
    ("en el log aparece Hq4kT9zLm2Xw, esa es mi contraseña", "Hq4kT9zLm2Xw"),
    # full-width brackets after a credential word in CJK text
    ("数据库密码（Kq8#mL2zXv7）已经改过了", "Kq8#mL2zXv7"),
    ("パスワード【Tz9kQ2mLx7Wp】でログインできません", "Tz9kQ2mLx7Wp"),
    # a quoted value led by a symbol under a secret's name
    ("  db:\n    password: '#Kq8mL2zXv7!'", "#Kq8mL2zXv7!"),
    ('smtp_pass = "!Tz9kQ2mLx7Wp"', "!Tz9kQ2mLx7Wp"),
])
def test_forms_of_holdout13s_misses_are_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    "mysql -h db01 -P 3306 -p appdb",  # -p without a value made like a password: mysql prompts, appdb is a name
    "./mcrcon -H 127.0.0.1 -P 25575 -p $RCON_PASSWORD",  # a variable
    'rcon.authenticate(password);',  # a variable, no literal
    'with MCRcon("127.0.0.1", "list") as mcr:',  # a word
    'r = redis.Redis("cache", 6379, 0, "utf-8")',  # an encoding
    'rcon -a 127.0.0.1:25575 -p $RCON_PASS "list"',  # a variable
    'user.authenticate("password")',  # the word itself
    "la contraseña de aplicación tiene dieciséis letras",  # words, not a password
    "the SMTP server said authenticationfailed",  # one word
    "git log --format=%H | head  # commit_hash=9c1e7a4b2d8f3e6a0c5b7d9e1f3a5c7b",  # a hash, not Telegram's
    "SRCT_LENGTH=64",  # a size
    "db_pswd: ${DB_PSWD}",  # a reference
    "requirepass is commented out in redis.conf",  # the directive named, no value
    "see the secret [docs] and the password (optional)",  # words in brackets
    "the version 2024.11.03, which is my favourite release",  # not a password's name
    "Bitwarden, which is my password manager",  # a name, then a word that is no password's name
    "Kq8mL2zXv7Tp, which is my password manager's id",  # the clause goes on: the value is not the password
    "数据库密码（见配置文件）已经改过了",  # words in full-width brackets
    "  db:\n    password: '#{DB_PASSWORD}'",  # a Ruby interpolation
    "  color: '#ff8800'",  # not a secret's name
])
def test_look_alikes_of_holdout13s_misses_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize("text", [
    "$ python demo_server.py\nRead key: 9c1e7a4b2d8f3e6a0c5b7d9e1f3a5c7b\nListening for connection ...",
    "Server host key: 4e8b2f6a0c9d3e7b1f5a8c2d6e0b4f9a",
    "ED25519 key fingerprint is 3f:2a:9c:1e:7b:4d:8a:6f:0c:5e:9b:2d:7f:1a:4c:8e.",
])
def test_a_host_keys_fingerprint_is_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    ("API key: 9c1e7a4b2d8f3e6a0c5b7d9e1f3a5c7b", "9c1e7a4b2d8f3e6a0c5b7d9e1f3a5c7b"),  # a key, not its fingerprint
    ("read the key: Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5", "Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5"),  # not a digest
])
def test_a_key_beside_fingerprint_words_is_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    'window.Echo = new Echo({ broadcaster: "pusher", key: "7e2c9a4b1d8f3e6a0c5b", cluster: "eu" });',
    "RECAPTCHA_SITE_KEY=6LcQm7Kx2Lp9Zt4Vb8Nc3Wr6Yh1Jd5Gf0Sa2EkA",
    "TURNSTILE_SITEKEY=0x4AAAAAAAFI_1GbSiLWDb4B",
])
def test_keys_their_vendor_documents_for_the_browser_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    ("RECAPTCHA_SECRET_KEY=6LcQm7Kx2Lp9Zt4Vb8Nc3Wr6Yh1Jd5Gf0Sa2EkA", "6LcQm7Kx2Lp9Zt4Vb8Nc3Wr6Yh1Jd5Gf0Sa2EkA"),
    ("ALGOLIA_ADMIN_KEY=4e8b2f6a0c9d3e7b1f5a8c2d6e0b4f9a", "4e8b2f6a0c9d3e7b1f5a8c2d6e0b4f9a"),
    ("PUSHER_APP_SECRET=4d8b2f6a0e9c3a7b1f5d", "4d8b2f6a0e9c3a7b1f5d"),
])
def test_the_secret_beside_a_browser_key_is_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    # a connection string's Name=value; run is settings; its password a placeholder
    'dotnet user-secrets set "Db:Conn" "Server=.;Database=Orders;User ID=sa;Password=YOUR_PASSWORD;Encrypt=False;"',
    "Server=db01;Database=Shop;User Id=app;Password=<password>;",
    # Markdown emphasis after a credential word
    "la contraseña es un riesgo. **Deben** cambiar la contraseña hoy",
    "the password is __required__ here",
    # two words of text joined by "_" or "-"
    "ALTER USER app WITH PASSWORD 'nueva_clave';",
    "secret: 'keyboard-kitten'",
    # ciphertext, public keys, keys shipped to the browser, keys cut short
    "spring.datasource.password={cipher}7c4a8d09ca3762af61e59520943dc26494f8941b0e9c3d7b1f5a8c3b9f1e7a5c",
    "spring.datasource.password={cipher}{key:prod}AQBx9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    "db.password=vault:v1:8SDd3WHDOjf7mq69CyCqYjBXAiQQAVZRkFM13ok481zoCmHnSeDX9vyf7w==",
    "db.password=![Kq8mZ2vX9pTq7Lm2Zk9xWb3Yc6Hd1Jg5==]",
    "nodekey:3f9c1e7a4b2d8f6e0a5c7b9d1e3f5a7c9b2d4f6e8a0c1e3f5a7b9c2d4e6f8a0c",
    '<script src="https://pay.example/snap.js" data-client-key="SB-Mid-client-Kq8mL2zXv7Tp4Rn9"></script>',
    '<div class="g" data-key="pk_live_51Hq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Ks0"></div>',
    "[Interface]\nPrivateKey = Kq8mL2zXv7Tp4Rn9Wb3=\n[Peer]\nPresharedKey = Hd1Jg5Ks0Aa2+Bb4=",
    # an image's, an action's or a package's reference after "@" (not an Oracle connect string)
    "grafana/grafana:11.2.0@sha256:1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e",
    "image: ghcr.io/acme/api:2.4.1@sha256:0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d",
    "uses: acme/Kq8mZ2vX9p@v4",
    "npm i acme/Kq8mZ2vX9p@1.2.3",
])
def test_look_alikes_of_holdout14s_false_positives_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    # the counterparts: a real password in the same places
    ('dotnet user-secrets set "Db:Conn" "Server=.;Database=Orders;User ID=sa;Password=$@Kq8mZ2vX9p$Tq7L;"',
     "$@Kq8mZ2vX9p$Tq7L"),
    ("ALTER USER app WITH PASSWORD 'Kq8_mZ2vX9p';", "Kq8_mZ2vX9p"),
    ("[Interface]\nPrivateKey = Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Ks0Aa2Bb4Cc6Dd8=",
     "Kq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Ks0Aa2Bb4Cc6Dd8="),
    ("tailscale: privkey:3f9c1e7a4b2d8f6e0a5c7b9d1e3f5a7c9b2d4f6e8a0c1e3f5a7b9c2d4e6f8a0c",
     "3f9c1e7a4b2d8f6e0a5c7b9d1e3f5a7c9b2d4f6e8a0c1e3f5a7b9c2d4e6f8a0c"),
    ('<div data-secret-key="sk_live_51Hq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Ks0"></div>',
     "sk_live_51Hq8mL2zXv7Tp4Rn9Wb3Yc6Hd1Jg5Ks0"),
    ("sqlplus scott/Kq8mZ2vX9p@db01:1521/ORCL", "Kq8mZ2vX9p"),
    ("db.password=Kq8mZ2vX9pTq7Lm2Zk9xWb3Yc6Hd1Jg5==", "Kq8mZ2vX9pTq7Lm2Zk9xWb3Yc6Hd1Jg5=="),  # no cipher's mark
    ("sqlplus scott/Kq8mZ2vX9p@10.0.0.5:1521/ORCL", "Kq8mZ2vX9p"),
])
def test_counterparts_of_holdout14s_false_positives_are_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize(("text", "value"), [
    # an option whose name ends in a word for password
    ("./bin/db init --dbhost localhost --dbuser root --dbpassword Qm7vK2xLp9", "Qm7vK2xLp9"),
    ("install.php --admin-pass=Vz8kQ2mLx7 --admin-user=root", "Vz8kQ2mLx7"),
    ("setup.sh --smtp-pwd Hz7kQ2mLx9 --smtp-user mailer", "Hz7kQ2mLx9"),
    ("mysql --host=db --user=root --password=Kq8(mZ2&vX9p shop", "Kq8(mZ2&vX9p"),
    ('./valheim_server.x86_64 -name "My server" -port 2456 -password "Hz7kQ2mLx9"', "Hz7kQ2mLx9"),
    # a quoted name and its quoted value, symbols and all
    ("define( 'DB_PASSWORD', 'Tq7Lm&Z2k(Xv9R' );", "Tq7Lm&Z2k(Xv9R"),
    ("'password' => 'Qz7(mK2&xLv9',", "Qz7(mK2&xLv9"),
    ('os.Setenv("DB_PASSWORD", "Wm4(zQ8&kLp")', "Wm4(zQ8&kLp"),
    ("$config['db_pass'] = 'Np3(kT9&qLm2';", "Np3(kT9&qLm2"),
    ("putenv('SMTP_PASSWORD=Lq8m(K2&zXv7');", "Lq8m(K2&zXv7"),
    # a short random password under a password's name
    ("      basicAuthUser: admin\n      basicAuthPassword: qvtzk", "qvtzk"),
    ('{"user": "admin", "pwd": "zkqvb"}', "zkqvb"),
    # an application's salt
    ("SetEnv APP_SECURITY_SALT 7c4a8d09ca3762af61e59520943dc26494f8941b", "7c4a8d09ca3762af61e59520943dc26494f8941b"),
    ("define('NONCE_SALT', 'Lq8m;K2zXv7Tp4Rn9Wb3Yc6Hd1Jg5');", "Lq8m;K2zXv7Tp4Rn9Wb3Yc6Hd1Jg5"),
    ("Configure::write('Security.salt', '9f8e7d6c5b4a39281706f5e4d3c2b1a0aa');", "9f8e7d6c5b4a39281706f5e4d3c2b1a0aa"),
    ("$settings['hash_salt'] = 'Kq8mZ2vX9pTq7Lm2Zk9xWb3Yc6';", "Kq8mZ2vX9pTq7Lm2Zk9xWb3Yc6"),
    # a web API's key in a query string
    ("https://api.steampowered.com/IPlayerService/GetOwnedGames/v1/?key=0A1B2C3D4E5F60718293A4B5C6D7E8F9&steamid=1",
     "0A1B2C3D4E5F60718293A4B5C6D7E8F9"),
    ("curl 'https://www.omdbapi.com/?t=Heat&apikey=Kq8mL2zXv7Tp4Rn9'", "Kq8mL2zXv7Tp4Rn9"),
    # a game server's login token, Web API key and passwords
    ("./srcds_run -game tf +map ctf_2fort +sv_setsteamaccount 9C8B7A6F5E4D3C2B1A0F9E8D7C6B5A49",
     "9C8B7A6F5E4D3C2B1A0F9E8D7C6B5A49"),
    ("srcds.exe -console -game csgo -authkey 1A2B3C4D5E6F708192A3B4C5D6E7F809 +map de_mirage",
     "1A2B3C4D5E6F708192A3B4C5D6E7F809"),
    ('sv_setsteamaccount "7F6E5D4C3B2A190817F6E5D4C3B2A190"', "7F6E5D4C3B2A190817F6E5D4C3B2A190"),
    ("GSLT=5D4C3B2A190817F6E5D4C3B2A1908F7E ./start.sh", "5D4C3B2A190817F6E5D4C3B2A1908F7E"),
    ("+set rcon_password Tq7Lm2Zk9x +set sv_hostname test", "Tq7Lm2Zk9x"),
    # a login after "as" on a line that connects
    ("INFO Connecting to jdbc:postgresql://pg:5432/app as app_rw / Lq8mK2zXv7Tp", "Lq8mK2zXv7Tp"),
    ("logged in to ftp.acme.io as deploy/Hz7kQ2mLx9", "Hz7kQ2mLx9"),
    # a URL's password holding "@"
    ("DATABASE_URL=postgres://app:Kq8@mL2zXv7@db.internal:5432/app", "Kq8@mL2zXv7"),
    ("database_url: mysql://opensips:@Vz8kQ2mLx7@localhost", "@Vz8kQ2mLx7"),
    ("redis://:@Kq8mZ2vX9p@cache:6379/0", "@Kq8mZ2vX9p"),
    # a Tuya device's local key
    ('d = tinytuya.OutletDevice("bf6hq0jyqtzp38r5xvzz", "192.168.1.60", "Kq8]mL2z{Xv7Tp4R")', "Kq8]mL2z{Xv7Tp4R"),
    ("    local_key: 'Wb3}Yc6[Hd1=Jg5K'", "Wb3}Yc6[Hd1=Jg5K"),
    ('{\n  "name": "Lamp",\n  "id": "bf0a1b2c3d4e5f6g7h8i9j",\n  "key": "x7M]k2{Q=9pLvT4r",\n  "ip": "10.0.0.41"\n}',
     "x7M]k2{Q=9pLvT4r"),
    ("devices:\n  - id: bf6hq0jyqtzp38r5xvzz\n    key: Wb3}Yc6[Hd1=Jg5K\n    ip: 10.0.0.7", "Wb3}Yc6[Hd1=Jg5K"),
    ("tuya-cli get --id bf6hq0jyqtzp38r5xvzz --key 'Wb3}Yc6[Hd1=Jg5K'", "Wb3}Yc6[Hd1=Jg5K"),
    # an auth file's user line, then its password line
    ("cat /etc/openvpn/client/auth.txt\nvpn-office\nKq8mL2zXv7Tp", "Kq8mL2zXv7Tp"),
    ("auth-user-pass /etc/openvpn/creds\n# /etc/openvpn/creds:\nvpnuser\nHz7kQ2mLx9Vb", "Hz7kQ2mLx9Vb"),
    ("printf 'office-vpn\\nXr7kQ2mLz9Tp\\n' > /etc/openvpn/auth.txt", "Xr7kQ2mLz9Tp"),
    # a value put into a field a password word names
    ("The field `Password` is empty. When I insert `zqvkt` into that field and test again, it works", "zqvkt"),
    ("Enter `Lq8mK2zXv7` in the password field and press Save.", "Lq8mK2zXv7"),
    ("In the API Key field I pasted `Kq8mZ2vX9pTq7Lm2` and it worked", "Kq8mZ2vX9pTq7Lm2"),
    # a literal written into a $password variable, word and digits
    ("Hola, prueba escribiendo 'clave42' en la variable $password", "clave42"),
])
def test_forms_of_holdout14s_misses_are_found(text, value):
    assert value not in scrub(text).text


def test_a_url_password_holding_at_is_redacted_whole_and_counted_once():
    out = scrub("database_admin_url: mysql://root:Kq8mZ2v@X9@localhost")
    assert "X9@localhost" not in out.text and "Kq8mZ2v" not in out.text
    assert sum(out.redactions.values()) == 1


@pytest.mark.parametrize("text", [
    "--password-file /run/secrets/db --dbuser root",
    "docker login --password-stdin registry.acme.io",
    "./bin/db init --dbpassword $DB_PASSWORD",
    "./bin/db init --dbpassword=<password>",
    "ansible-playbook --ask-vault-pass site.yml",
    "the `-password` flag is deprecated, use --password-file",
    "define( 'DB_PASSWORD', getenv('DB_PASSWORD') );",
    "define( 'DB_PASSWORD', 'password_here' );",
    "'password' => 'required|string|min:8|confirmed',",
    "'password' => env('DB_PASSWORD'),",
    "'password_confirmation' => 'same:password',",
    "      basicAuthPassword: admin",
    "      basicAuthPassword: ${GRAFANA_PW}",
    "passwordMinLength: 12345",
    "pwd: /home/ivan",
    '"salt": "9f8e7d6c5b4a39281706f5e4d3c2b1a0",',  # a password hash's own salt
    "'salt' => 'Kq8mZ2vX9pTq7Lm2Zk9xWb3Yc6',",
    "SECURITY_SALT_LENGTH=32",
    "define('AUTH_SALT', 'put your unique phrase here');",
    "SECURITY_SALT=${SECURITY_SALT}",
    "$settings['hash_salt'] = file_get_contents('/home/salt.txt');",
    "https://cdn.acme.io/assets/app.js?key=v2",
    "https://api.acme.io/items?key=uploads/2024/report.pdf",
    "https://maps.googleapis.com/maps/api/js?key=YOUR_API_KEY",
    "https://example.com/?key=${API_KEY}",
    "https://cache.acme.io/?key=5d41402abc4b2a76b9719d911017c592",  # a digest as a cache's key
    "./srcds_run -game csgo +sv_setsteamaccount YOURLOGINTOKEN +map de_dust2",
    "./srcds_run -game csgo +sv_setsteamaccount <token>",
    "GSLT=${GSLT}",
    'sv_password ""',
    "Connecting to broker as read/write client",
    "logged in as admin/operator role",
    "https://user@host.io/path@v2",
    "postgres://user:@db:5432/app",
    "https://host.io/?email=a@b.com&x=y@z.com",
    '{"name": "lamp", "key": "living-room-lamp", "id": 3, "ip": "10.0.0.4"}',
    '{"id": 1, "key": "ctrl+shift+p", "ip": "10.0.0.5"}',
    "- id: 3\n  key: sort_by_name_desc\n  ip: 10.0.0.3",
    "    local_key: ${TUYA_LOCAL_KEY}",
    "tuya-cli list --key name",
    "cat /etc/openvpn/client/auth.txt\nvpnuser\nmypassword",
    "cat auth.txt\nthe file holds two lines\nthen it continues",
    "When I insert `localhost` into that field it works",
    "I typed 'admin' into the password field",
    "Enter `Kq8mL2zXv7` in the search box and press Enter.",
    "In the Name field I typed 'Johnathan' and saved",
    "put 'abc123' into $password",
    "escribe 'hola' en la variable $password",
    'tok = re.findall("token=([a-z0-9]+)", url)[0]',  # a pattern
    "re.compile('password=(\\S+)')",
])
def test_look_alikes_of_holdout14s_misses_are_left_alone(text):
    assert scrub(text).text == text


_DEEPL = "3f2a9c41-7d0e-4b8a-9c15-e2d47a6b0f93"  # a UUID made up for these tests


@pytest.mark.parametrize(("text", "value"), [
    # a quoted value given to a command's option runs to its closing quote, "@", "#" and ";" inside it
    ("redis-cli -h cache.acme.io -p 6380 -a 'Qm@Z7#kvLp@x2Rt9' --no-auth-warning PING", "Qm@Z7#kvLp@x2Rt9"),
    ('valkey-cli --pass "Wz;8@qLm#Tx2vKp7" INFO', "Wz;8@qLm#Tx2vKp7"),
    ("redis-cli -a Qm@Z7#kvLp@x2Rt9 ping", "Qm@Z7#kvLp@x2Rt9"),  # unquoted: the shell passes "@" and "#" too
    ("keydb-cli -h 10.0.0.3 -p 6379 -a Kq8m@zP2#vLx9 INFO", "Kq8m@zP2#vLx9"),
    ("mongosh -u admin -p 'zR7@kq#Vm2Lx9p' --authenticationDatabase admin", "zR7@kq#Vm2Lx9p"),
    ("keytool -list -keystore app.jks -storepass 'Tq4@mZ#8vLx2Kp'", "Tq4@mZ#8vLx2Kp"),
    # a comma-separated option list: each value ends at the next `,name=`
    ("output      mqtt://10.0.0.7:1883,user=sensors,pass=Hq7-zLmV2pKx,retain=1", "Hq7-zLmV2pKx"),
    ('rtl_433 -F "mqtt://broker.lan:1883,user=hass,password=Vp3-kQz9LmXw,devices=rtl/[id]"', "Vp3-kQz9LmXw"),
    ("mount -t cifs //nas/share /mnt/share -o username=bob,password=Kx9#mQ2vLp7z,vers=3.0", "Kx9#mQ2vLp7z"),
    # a base64 literal the line decodes, when what it decodes to is made like a credential
    ("# decode the secret\necho 'SDd6I2tWbTJxTHA5WHc=' | base64 --decode", "SDd6I2tWbTJxTHA5WHc="),
    ("echo -n cm9vdDpLcThtI3pQMnZMeDk= | base64 -d", "cm9vdDpLcThtI3pQMnZMeDk="),
    ("base64 -d <<< 'SDd6I2tWbTJxTHA5WHc='", "SDd6I2tWbTJxTHA5WHc="),
    ('pw = base64.b64decode("SDd6I2tWbTJxTHA5WHc=").decode()', "SDd6I2tWbTJxTHA5WHc="),
    ("const key = Buffer.from('SDd6I2tWbTJxTHA5WHc=', 'base64').toString()", "SDd6I2tWbTJxTHA5WHc="),
    ('$pw = [Text.Encoding]::UTF8.GetString([Convert]::FromBase64String("SDd6I2tWbTJxTHA5WHc="))',
     "SDd6I2tWbTJxTHA5WHc="),
    # ... and the other way: a plain secret piped into an encoder or passed to one
    ('echo -n "v8^Kq2mZx#Lp7Tr" | base64\n# paste it under data.password', "v8^Kq2mZx#Lp7Tr"),
    ('headers = {"Authorization": "Basic " + btoa("api:Kq8m#zP2vLx9")}', "Kq8m#zP2vLx9"),
    ('base64.b64encode(b"Zq7mKx2vLp9Rt4")', "Zq7mKx2vLp9Rt4"),
    # DeepL's API Free key: a UUID then ":fx"
    (f"Hier der API-Schlüssel für DeepL: {_DEEPL}:fx", _DEEPL + ":fx"),
    (f"DEEPL_AUTH_KEY={_DEEPL}:fx", _DEEPL + ":fx"),
    (f"translator = deepl.Translator('{_DEEPL}:fx')", _DEEPL),
    # values beside the look-alikes below are still found
    ("SigningConfig{name=release, storePassword=Kq8mZ2vX9pTq, keyPassword=null}", "Kq8mZ2vX9pTq"),
    ("ASAAS_API_KEY=$aact_prod_000MzkwODA2MWY2OGM3MWRlMDU2NWM3MzJlNzZmNGZhZGY6OjQ2",
     "MzkwODA2MWY2OGM3MWRlMDU2NWM3MzJlNzZmNGZhZGY6OjQ2"),
    ("{'broker': '10.0.0.2', 'password': 'Vq7#kLm2zXp9', 'username': 'hass'}", "Vq7#kLm2zXp9"),
    ('npmrc = "//registry.npmjs.org/:_authToken=" + "npm_Kq8mZ2vX9pTq7Lm2Zk9xWb3Yc6Hd1Jg5Fs0Q"',
     "npm_Kq8mZ2vX9pTq7Lm2Zk9xWb3Yc6Hd1Jg5Fs0Q"),
])
def test_forms_of_holdout15s_misses_are_found(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    # null and its kin are no value, whatever bracket closes the structure after them
    "Could not get unknown property for SigningConfig_Decorated{name=release, storePassword=null, keyAlias=null, "
    "keyPassword=null}",
    "Config(password=None)",
    "opts[password=nil]",
    "{token=undefined}",
    "creds = {password=null, token=null}",
    # a placeholder said in words, in other languages as in English
    "ASAAS_API_KEY=sua_chave_aqui  # pegue em Minha Conta > Integrações",
    "DB_PASSWORD=sua-senha-aqui",
    "API_KEY=tu_clave_aqui",
    "SECRET_KEY=clave_secreta",
    "API_KEY=votre_cle_ici",
    "API_KEY=dein_schluessel_hier",
    "API_KEY=la_tua_chiave",
    "PASSWORD=jouw_wachtwoord_hier",
    "password: minha_senha",
    # a stand-in that names itself, in an abbreviation too
    "{'broker': '192.168.1.XXX', 'password': 'clear_text_pwd', 'port': 1883, 'username': 'clear_text_userid'}",
    "password: 'plain_text_password'",
    "'pw': 'my_db_pw'",
    # code that builds the value: the credential's name stands inside a literal that "=" closes
    '{"npmrc-auth-token", join("//registry.npmjs.org/:_authToken=", syntheticToken(32)), "x"},',
    "url = 'https://api.acme.io/v1?token=' + make_token() + '&page=2'",
    'line = "password=" + ", ".join(parts)',
    "line = 'token=' .. ngx.var.token .. '&x=1'",
    'sb.append("&secret=").append(secret).append("&x=")',
    # an option list's placeholders and references
    "output mqtt://HOST:PORT,user=USER,pass=PASSWORD,retain=1",
    "output mqtt://localhost:1883,user=rtl,pass=$MQTT_PASS,retain=1",
    "mount -t cifs //nas/share /mnt -o username=bob,password=<password>,vers=3.0",
    # base64 of no credential, decoded or encoded
    "echo 'aGVsbG8gd29ybGQ=' | base64 -d",  # hello world
    'echo "cGFzc3dvcmQ=" | base64 -d',  # password
    'atob("eyJhbGciOiJIUzI1NiJ9")',  # a JWT header
    "echo -n 'admin' | base64",
    "echo $TOKEN | base64",
    "echo -n 'password123' | base64",
    "cat secret.txt | base64 -d > key.bin",
    "assert b64encode(b'\\x00\\x7f\\xfe') == b'AH/+'",  # bytes by their escapes
    # redis-cli's -a given a reference or a placeholder, and sqlplus' connect string (its "@" ends the password)
    "redis-cli -a $REDIS_PASSWORD ping",
    "redis-cli -a yourpassword ping",
    "redis-cli -a <password> --no-auth-warning ping",
    "redis-cli -h cache.acme.io -p 6379 --user default --askpass",
    # a UUID alone, with no ":fx"
    "request id 3f2a9c41-7d0e-4b8a-9c15-e2d47a6b0f93:fxd failed",
    "trace: 3f2a9c41-7d0e-4b8a-9c15-e2d47a6b0f93",
])
def test_look_alikes_of_holdout15s_misses_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize("value", ["twoje_haslo_tutaj", "vase_heslo_zde", "ditt_losenord_har", "sifreniz_buraya",
                                   "kata_sandi_anda", "SuaChaveAqui", "tu-contrasena-aqui"])
def test_a_stand_in_said_in_another_language_is_a_placeholder(value):
    assert secret_values.placeholder(value)


@pytest.mark.parametrize("value", ["Kq8mZ2vX9pTq", "harvest2024pw", "sua9Xq2LmZ7kV", "Hq7-zLmV2pKx"])
def test_a_value_with_no_stand_in_words_is_no_placeholder(value):
    assert not secret_values.placeholder(value)


@pytest.mark.parametrize(("text", "value"), [
    # a quoted literal led by "$" whose name after it is generated: a password's symbol, not a variable
    ("$dbpass = '$Qm7vTz2LkWx9';", "$Qm7vTz2LkWx9"),
    ("        'PASSWORD': '$k4Rw9zLq2V@',", "$k4Rw9zLq2V@"),
    ("'password' => '$Xk9mQ2vLp7',", "$Xk9mQ2vLp7"),
    ('DB_PASSWORD: "$h8Tq3mVw2zK"', "$h8Tq3mVw2zK"),
    ("my $db_pwd = '$Zr5kLq8mW2x';", "$Zr5kLq8mW2x"),
    # "$" inside a lookup's default (python-decouple's, django-environ's)
    ("SECRET_KEY = config('DJANGO_SECRET_KEY', default='7k@q2=_$vb)81!4%%mpxz!qrt&w5^uy!93h*2lz!&17c9-x40')",
     "7k@q2=_$vb)81!4%%mpxz!qrt&w5^uy!93h*2lz!&17c9-x40"),
    ("API_TOKEN = os.getenv('API_TOKEN', 'Lq8$mZ2vXk7Tp')", "Lq8$mZ2vXk7Tp"),
    # a setting's value written where a lookup's variable name goes
    ("        'Password': config('wqbt4KzpLM$$r'),", "wqbt4KzpLM$$r"),
    ("DB_PASS = os.getenv('k9#Qz!2mWx')", "k9#Qz!2mWx"),
    ("'secret': env('Hv7!qLm2@zXk'),", "Hv7!qLm2@zXk"),
])
def test_holdout16s_dollar_forms_are_caught(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    # "$" before a name: a variable, in any quotes
    "$dbpass = '$dbPassword2';",
    "        'PASSWORD': '$DB_PASSWORD',",
    'password: "$mysqlRootPass"',
    "DB_PASS='$DB_PASSWORD_VALUE'",
    "$user = '$Xk9mQ2vLp7';",  # no credential's name
    "$dbhost = '$Xk9mQ2vLp7';",
    # a lookup's default that is a reference, a lookup given a name
    "SECRET_KEY = env('DJANGO_SECRET_KEY', '${SECRET_KEY_VALUE}')",
    "SECRET_KEY = config('DJANGO_SECRET_KEY', default='$(cat /run/secrets/key)')",
    "'PASSWORD': config('DATABASE_PASSWORD'),",
    "DB_PASS = os.getenv('${DB_PASSWORD}')",
    "'USER': config('wqbt4KzpLM$$r'),",  # no credential's name
])
def test_look_alikes_of_holdout16s_dollar_forms_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize("text", [
    # a value given to what its name says is public
    'Mercadopago.setPublishableKey("TEST-7d2e1b9a-4c3f-4a8e-b1d2-9e8f7a6c5b4d");',
    'Stripe.setPublishableKey("Lq8mZ2vXk7Tp4Rn9Wb3Yc6");',
    'sdk.setPublicKey("Hv7qLm2zXk9Tp4Rn8Wb3Yc");',
    # a value its own short name labels as a request's id, after a credential word
    "errmsg: 'invalid credential, access_token is invalid or not latest rid: 4a7c91e2-c08fd31b-92ab6e05'",
    "errmsg: 'invalid appsecret, request_id: 7c1e9a42-b3f0d61e-82a4c5d9'",
    "token rejected (trace-id: 9f3b2c71-e4a0d8b6-15c7f2e9)",
    # an access key id quoted back by AWS's own error message
    "An error occurred (InvalidClientTokenId) when calling the GetCallerIdentity operation: The security token"
    " included in the request is invalid. (key id AKIAQ3EGRZ7V5LMX2K4P)",
    "An error occurred (InvalidAccessKeyId) when calling the ListBuckets operation: The AWS Access Key Id you"
    " provided does not exist in our records. AKIAW7TRXQ2LM5NZ8K3D",
])
def test_holdout16s_false_positive_forms_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    ('Stripe.setSecretKey("Lq8mZ2vXk7Tp4Rn9Wb3Yc6");', "Lq8mZ2vXk7Tp4Rn9Wb3Yc6"),
    ('client.setAccessToken("Hv7qLm2zXk9Tp4Rn8Wb3Yc");', "Hv7qLm2zXk9Tp4Rn8Wb3Yc"),
    ("the access_token is 9Kq2mZ8vLx7TpR4nWb3Yc6Hd1Jg5", "9Kq2mZ8vLx7TpR4nWb3Yc6Hd1Jg5"),
    ("aws_access_key_id = AKIAQ3EGRZ7V5LMX2K4P", "AKIAQ3EGRZ7V5LMX2K4P"),  # no error message: dev's lone key id
    # an error message's line still gives up a secret key beside the id
    ("An error occurred (SignatureDoesNotMatch): aws_secret_access_key = Lq8mZ2vXk7Tp/4Rn9Wb3Yc6Hd1Jg5Kq8mZ2vXk7Tp",
     "Lq8mZ2vXk7Tp/4Rn9Wb3Yc6Hd1Jg5Kq8mZ2vXk7Tp"),
])
def test_secrets_beside_holdout16s_false_positive_forms_are_caught(text, value):
    assert value not in scrub(text).text


_SESSION_TOKEN = ("IQoJb3JpZ2luX2VjEHkaCXVzLWVhc3QtMSJHMEUCIQDx7Kq2mZ8vLx7TpR4nWb3Yc6Hd1Jg5Lq8mZ2vXk7Tp4Rn9Wb3Yc6Hd1Jg5"
                  "Kq8mZ2vXk7Tp/4Rn9Wb3Yc6Hd1Jg5Lq8mZ2vXk7Tp4Rn9Wb3Yc6Hd1Jg5Mz3vXk7Tp4Rn9Wb3Yc6Hd1Jg5Lq8mZ2vXk7Tp4Rn9Wb3Y"
                  "c6Hd1Jg5+Kq8mZ2vXk7Tp4Rn9Wb3Yc6Hd1Jg5Lq8mZ2vXk7Tp4Rn9Wb3Yc6Hd1Jg5Nv4Xk7Tp4Rn9Wb3Yc6Hd1Jg5Lq8mZ2vXk7T"
                  "p4Rn9Wb3Yc6Hd1Jg5Pq2mZ8vLx7TpR4nWb3Yc6Hd1Jg5==")


@pytest.mark.parametrize(("text", "value"), [
    # a Terraform block named for the credential: its default, an output's literal value, the name bare (HCL1)
    ('variable secret_key {\n  default = "Wq7vTz2LkWx9Mn4Rb8Yc3Hd6Jg1Kp5Zs0Tf2Lq"\n}',
     "Wq7vTz2LkWx9Mn4Rb8Yc3Hd6Jg1Kp5Zs0Tf2Lq"),
    ('variable "aws_session_token" {\n  description = "Session token"\n  type = string\n  default = "'
     + _SESSION_TOKEN + '"\n}', _SESSION_TOKEN),
    ('output "db_password" {\n  value     = "Qm7vTz2LkWx9#p"\n  sensitive = true\n}', "Qm7vTz2LkWx9#p"),
    # an object named for the credential whose "value" follows other keys (terraform output -json)
    ('"password": {\n  "sensitive": true,\n  "type": "string",\n  "value": "Hb72KqLmPZ#vx"\n}', "Hb72KqLmPZ#vx"),
    ('{"admin_token": {"sensitive": true, "value": "Zx8Kq2mLv7Tp4Rn9"}}', "Zx8Kq2mLv7Tp4Rn9"),
])
def test_holdout16s_block_forms_are_caught(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    'output "db_password" {\n  value     = aws_db_instance.main.password\n  sensitive = true\n}',
    'variable "db_password" {\n  description = "the password"\n  type = string\n  sensitive = true\n}',
    'variable token_ttl {\n  default = "Qm7vTz2LkWx9"\n}',  # a name about a token, not one
    'variable "admin_password" {\n  default = "changeme"\n}',
    '"password": {\n  "sensitive": true,\n  "type": "string",\n  "value": "${var.db_password}"\n}',
    '"instance_id": {\n  "sensitive": false,\n  "value": "i-0a7b3c9d2e1f4a5b6"\n}',
])
def test_look_alikes_of_holdout16s_block_forms_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    # an SMTP AUTH LOGIN password line under a log's prefix
    ("[2021-03-04 10:11:12] DEBUG [a81f] S: 334 UGFzc3dvcmQ6\n[2021-03-04 10:11:12] DEBUG [a81f] C: S3E5eldMbTJ6UXA3\n"
     "[2021-03-04 10:11:13] DEBUG [a81f] S: 235 Authentication successful", "S3E5eldMbTJ6UXA3"),
    ("2024-01-02T10:11:12.123Z smtp-client[4411] <<< 334 UGFzc3dvcmQ6\n"
     "2024-01-02T10:11:12.124Z smtp-client[4411] >>> WnE3TG0ydlg5a1Rw", "WnE3TG0ydlg5a1Rw"),
    # a user option's password on a command's continued line: shell "\", cmd "^", PowerShell "`"
    ("curl -X POST https://api.twilio.com/2010-04-01/Accounts/AC3e9b1f7a2c4d6e8f0a1b3c5d7e9f2a4b/Messages.json \\\n"
     '  --data-urlencode "Body=hi" \\\n  -u AC3e9b1f7a2c4d6e8f0a1b3c5d7e9f2a4b:7f2c9e1a4b8d3f6e0c5a9b2d7e4f1a8c',
     "7f2c9e1a4b8d3f6e0c5a9b2d7e4f1a8c"),
    ("curl https://api.acme.io/v1/jobs ^\n  --user deploy:Kq8!mZ2vXk7T", "Kq8!mZ2vXk7T"),
    ("curl.exe https://api.acme.io/v1/jobs `\n  -u 'ci-bot:Wz7#qL2mXk9v'", "Wz7#qL2mXk9v"),
])
def test_holdout16s_line_forms_are_caught(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    "[2021-03-04 10:11:12] DEBUG [a81f] S: 334 UGFzc3dvcmQ6\n[2021-03-04 10:11:12] DEBUG [a81f] S: 535 failed",
    "curl https://api.acme.io \\\n  -u $TWILIO_ACCOUNT_SID:$TWILIO_AUTH_TOKEN",
    'curl https://api.acme.io \\\n  -u "AC3e9b1f7a2c4d6e8f0a1b3c5d7e9f2a4b:your_auth_token"',
    "curl https://api.acme.io \\\n  -u admin:admin",
    "curl https://api.acme.io \\\n  -u deploy -H 'Accept: application/json'",
])
def test_look_alikes_of_holdout16s_line_forms_are_left_alone(text):
    assert scrub(text).text == text


@pytest.mark.parametrize(("text", "value"), [
    ("This was the old secret access key, note the plus and slash characters:"
     " **Rq7vKz2LmWx9+Tp4Nb/8Yc3Hd6Jg1Ks5Zf0Tq2Lm**",
     "Rq7vKz2LmWx9+Tp4Nb/8Yc3Hd6Jg1Ks5Zf0Tq2Lm"),
    ("the AWS secret key from the console, use with care — `Kq8mZ2vXk7Tp/4Rn9Wb3Yc6Hd1Jg5Lq8mZ2vXk7T`",
     "Kq8mZ2vXk7Tp/4Rn9Wb3Yc6Hd1Jg5Lq8mZ2vXk7T"),
])
def test_an_aws_secret_key_on_a_line_that_names_one_is_caught(text, value):
    assert value not in scrub(text).text


@pytest.mark.parametrize("text", [
    "secret access key: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",  # AWS's documented example
    "my secret access key was rotated, commit 4f1e9c2a7b3d5e8f0a1c2b4d6e8f0a1c3b5d7e9f",  # a digest: no capitals
    "the secret access key lives in the vault at secret/data/ci/aws-deploy-credentials-for-the-pipeline",
])
def test_look_alikes_of_an_aws_secret_key_are_left_alone(text):
    assert scrub(text).text == text


def test_a_long_line_under_a_credential_name_is_read_once_not_once_a_character():
    # The auth-file form once tried its file name from each character of a line: 5 s for this text on a quiet
    # machine, 9 ms since; the bound leaves a hundredfold margin for a loaded one.
    scrub("warm up: rules and models loaded")
    text = 'variable "secret_key" {\n  default = "' + "x" * 20000 + '"\n}'
    started = time.perf_counter()
    scrub(text)
    assert time.perf_counter() - started < 1.0
