"""The word for "password" and for "username" in many languages, from one published source.

Source: Django 5.2's translations of its auth app (django/contrib/auth/locale/*/LC_MESSAGES/django.po,
msgid "password" and msgid "username"; BSD-3-Clause, translated by Django's Transifex teams), lower
case, one entry per distinct translation (73 and 78 of them, from 96 locales). A list taken whole
from one source rather than grown a language at a time from the labelled splits: the blind splits
keep writing in languages no split had before. secret_rules builds its credential words from
PASSWORD_WORDS; secret_positional reads a "user: ..." line with USER_WORDS.
"""

from __future__ import annotations

import re

PASSWORD_WORDS = (
    "adgangskode", "awal uffir", "contrasenya", "contraseña", "contrasigno", "contrasinal", "cyfrinair",
    "facal-faire", "fjalëkalim", "focal faire", "ger-tremen", "geslo", "gronidło", "hasło", "heslo", "hesło",
    "jelszó", "kata laluan", "lozinka", "lykilorð", "lösenord", "mot de passe", "mật khẩu", "nenosiri",
    "palavra-passe", "parol", "parola", "parole", "parolă", "pasahitza", "passord", "password", "passwort",
    "pasvorto", "salasana", "salasõna", "sandi", "senha", "slaptažodis", "wachtwoord", "wagwoord", "şifrə",
    "συνθηματικό", "лозинка", "нууц үг", "парола", "пароль", "рамз", "серсүз", "сырсөз", "құпия сөз",
    "գաղտնաբառ", "סיסמה", "تێپەڕەوشە", "كلمة المرور", "پارول", "گذرواژه", "गुप्तशब्द", "पासवर्ड", "शब्दकूट",
    "পাসওয়ার্ড", "ਪਾਸਵਰਡ", "கடவுச்சொல்", "సంకేతపదం", "ಪ್ರವೇಶಪದ", "പാസ്സ്\u200cവേഡ്", "รหัสผ่าน", "პაროლი",
    "ពាក្យសំងាត់", "パスワード", "密码", "密碼", "비밀번호")

# Abbreviations of "password" people write in a setting's name (compose_mysql_pswd, DB_PSSWD, admin_passwrd), beside
# the common pass, pwd, passwd and pw that each module's word list already holds.
PASSWORD_ABBREVIATIONS = ("pswd", "pswrd", "psw", "pword", "psswd", "psswrd", "passwrd", "passw")

# Abbreviations of "secret" in a setting's name (SRCT, JWT_SCRT, APP_SECRT): its consonants.
SECRET_ABBREVIATIONS = ("srct", "scrt", "secrt", "sekret")

USER_WORDS = (
    "ainm úsáideoir", "ainm-cleachdaiche", "användarnamn", "benutzername", "brugernavn", "brukarnamn",
    "brukernavn", "emër përdoruesi", "enw defnyddiwr", "erabiltzailea", "felhasználónév", "gebruikernaam",
    "gebruikersnaam", "isem n useqdac", "istifadəçi adı", "jina la mtumiaji", "kasutajatunnus",
    "korisničko ime", "kullanıcı adı", "käyttäjätunnus", "lietotājvārds", "nama pengguna", "nazwa użytkownika",
    "nom d'usuari", "nom d’utilisateur", "nombre de usuario", "nome d'usuariu", "nome de usuario", "nome utente",
    "nomine de usator", "notandanafn", "nume utilizator", "používateľské meno", "salutnomo", "tên đăng nhập",
    "ulanyjy ady", "uporabniško ime", "username", "usuário", "utilizador", "uživatelské jméno",
    "vartotojo vardas", "wužiwarske mjeno", "wužywarske mě", "όνομα χρήστη", "имя пользователя", "колдонуучу аты",
    "корисничко име", "кулланучы исеме", "номи истифодабаранда", "потребител", "хэрэглэгчийн нэр",
    "ім'я користувача", "імя карыстальніка", "қолданушы атауы", "օգտագործողի անուն", "שם משתמש",
    "ئىشلەتكۈچى ئاتى", "اسم المستخدم", "نام کاربری", "ناوی بەکارهێنەر", "प्रयोक्ता नाम", "प्रयोगकर्ता नाम",
    "वापरकर्तानाव", "সদস্যনাম", "ਯੂਜ਼ਰ ਨਾਂ", "பயனர் பெயர்", "వాడుకరిపేరు", "ಬಳಕೆದಾರ-ಹೆಸರು", "ชื่อผู้ใช้",
    "მომხმარებლის სახელი", "ユーザー名", "使用者名稱", "用户名", "사용자 이름",
    # The short forms people type on a line of their own: "user:", "login:", "usuario:", "Benutzer:".
    "user", "login", "usuario", "utilisateur", "utente", "benutzer", "gebruiker", "użytkownik", "uživatel",
    "kullanıcı", "pengguna", "пользователь", "логин", "用户", "ユーザー", "사용자", "账号", "帳號")


def alternation(words: tuple[str, ...]) -> str:
    """A regex alternation of `words` as a trie (one branch per first letter, so that a position fails at
    its first character; longer words first within a branch), a space in a word matching any run of spaces."""
    words = tuple(sorted(set(words)))
    if not words:
        return ""
    branches = []
    for first in sorted({w[0] for w in words if w}):
        rests = tuple(w[1:] for w in words if w and w[0] == first)
        head = r"\s+" if first == " " else re.escape(first)
        tails = [r for r in rests if r]
        if not tails:
            branches.append(head)
            continue
        inner = alternation(tuple(tails))
        branches.append(head + "(?:" + inner + ")" + ("?" if "" in rests else ""))
    return "|".join(branches)


# A translated word may carry a short suffix (Icelandic "lykilorðið", Azerbaijani "şifrəni", Estonian
# "salasõnaga"): up to four letters, then no letter.
SUFFIX = r"[^\W\d_]{0,4}"
